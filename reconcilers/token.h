/* token: the Token reconciler (docs/compat.md#token-spec,
 * docs/compat.md#token-secret).
 *
 * For each Token CR: the Secret named by spec.secretRef (default
 * `<token>-jwt-<username>`, key SLURM_JWT) holding an HS256 JWT for
 * spec.username, minted with the raw bytes of the JWT signing key
 * (spec.jwtKeyRef, else jwtHs256KeyRef) and Slinky's claims (slurmio/jwt.h).
 * The Secret's controller owner is the signing-key Secret when it is in the
 * same namespace (the token dies with its key), else the Token.
 *
 * Refresh (spec.refresh, default true): the stored token is decoded with
 * the current key; it is re-minted at exp - lifetime/5 (tokb_refresh_plan),
 * when it has expired, and when it no longer verifies (the signing key was
 * rotated or the Secret was edited). The Token is always queued again
 * before its token is due: the requeue is never zero or negative (Slinky's
 * tokens silently stopped refreshing on exactly that, slurm-operator#240).
 * With refresh false the Secret is created immutable and left alone.
 *
 * Status: issuedAt = the iat claim of the stored token (when it verifies).
 *
 * Watches: the CR; its output Secret; its signing-key Secret.
 *
 * Policy (operator_opts.token_policy, tokb_policy): a Token naming a Slurm user the
 * operator does not allow, or asking for a longer lifetime than allowed,
 * gets a PolicyDenied Warning event and the condition Valid=False, and no
 * token is minted. A Secret named by spec.secretRef that exists and is not
 * ours (objsync_owned) is never written: the NotOwned event and the
 * OwnershipConflict condition say so (cluster_rc.h).
 */
#ifndef OP_TOKEN_H
#define OP_TOKEN_H

#include "reconcilers/operator.h"

#define TOKEN_CONTROLLER "token-controller"

/* Longest wait between two looks at a refreshing Token (a lifetime of
 * years is allowed; the queue's delay is 32-bit milliseconds). */
#define TOKEN_MAX_REQUEUE_MS (24u * 3600u * 1000u)

extern const op_reconciler RC_TOKEN;

/** The reconciler's own state (its crc_module), made before setup and
 *  freed once the operator's client has closed, through the registry
 *  (RC_TOKEN). The policy is not in it: it is the operator's configuration
 *  (operator_opts.token_policy). */
typedef struct token_state token_state;
/** op's (never NULL from op_start on). */
token_state *token_of(const operator *op);

#endif
