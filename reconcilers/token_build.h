/* token_build: the Secret of a Token CR and its refresh schedule
 * (docs/compat.md#token-spec, docs/compat.md#token-secret).
 *
 * A Token asks for an HS256 JWT for spec.username, stored in a Secret and
 * (with refresh, the default) re-minted before it expires. Minting is done
 * elsewhere (slurmio/jwt.h); this module decides names, defaults, the Secret
 * object and when to act next.
 *
 * The refresh schedule never stops: tokb_refresh_plan() always asks for a
 * requeue of at least one second. Slinky once returned a requeue of zero or
 * less, which controller-runtime treats as "do not requeue", and tokens
 * silently expired (slurm-operator#240).
 */
#ifndef OP_TOKEN_BUILD_H
#define OP_TOKEN_BUILD_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "reconcilers/cluster_common.h"

#define TOKB_KIND "Token"
#define TOKB_DEFAULT_KEY "SLURM_JWT"
#define TOKB_DEFAULT_LIFETIME_S (15 * 60)
#define TOKB_MAX_LIFETIME_S 2147483646LL

/** The effective settings of a Token after defaults. Strings point into
 *  the CR (or are static) and live as long as it. */
typedef struct tokb_settings {
    const char *username;   /* spec.username ("" when absent; validation rejects it) */
    int64_t lifetime_ms;    /* spec.lifetime (Go duration) or 15m, clamped to [0, 2147483646 s] */
    int refresh;            /* spec.refresh, default true */
    char secret_name[254];  /* spec.secretRef.name or "<token>-jwt-<username>" (truncated to 253) */
    const char *secret_key; /* spec.secretRef.key or "SLURM_JWT" */
    const cJSON *jwt_ref;   /* spec.jwtKeyRef, else spec.jwtHs256KeyRef, else NULL */
} tokb_settings;

/** Fill *s from token. 0, or OP_EPARSE when spec.lifetime is not a valid
 *  Go duration (message in *why); the other fields are filled anyway, with
 *  the default lifetime. */
int tokb_settings_get(const cJSON *token, tokb_settings *s, char **why);

/** A copy of token with the defaults written out: spec.lifetime "15m0s"
 *  when absent, spec.refresh true when absent, spec.secretRef {name, key}
 *  when absent. */
cJSON *tokb_defaults(const cJSON *token);

/** The Secret holding jwt (an already minted token): name and key per
 *  tokb_settings, data {key: base64(jwt)}, immutable = !refresh, labels and
 *  annotations copied from the Token.
 *
 *  Owner (docs/compat.md#token-secret): when key_secret (the JWT signing-key Secret, as stored,
 *  with metadata.name/uid) is given and lives in the Token's namespace, it
 *  is the controller owner (the token dies with its key); otherwise the
 *  Token is. The reconciler creates this Secret once and afterwards only
 *  patches data (never when immutable). */
int tokb_secret(const cJSON *token, const char *jwt, const cJSON *key_secret, cJSON **out, char **why);

/* The operator's Token policy (--token-users, --token-max-lifetime): which
 * Slurm users a Token may name and how long its JWT may live. Anybody who
 * may create a Token gets a JWT for the user it names, and slurmrestd
 * trusts that JWT completely, so by default no Token may name root or the
 * SlurmUser (the two identities that administer Slurm) and none may live
 * longer than a day. */
#define TOKB_POLICY_ANY "*"
#define TOKB_DEFAULT_MAX_LIFETIME_S (24 * 3600)

typedef struct tokb_policy {
    char **users;           /* the names listed (without "*"), malloc'd */
    size_t n_users;
    int any;                /* "*" listed: any user that is not privileged */
    int64_t max_lifetime_s; /* longest spec.lifetime accepted */
} tokb_policy;

/** Parse the policy: users is a comma-separated list of Slurm user names,
 *  "*" standing for every user but root and the SlurmUser (NULL or "": "*");
 *  max_lifetime a Go duration (NULL or "": 24h), at least 1s. 0, or
 *  OP_EINVAL with a message in *why (p is then empty). */
int tokb_policy_parse(const char *users, const char *max_lifetime, tokb_policy *p, char **why);
void tokb_policy_free(tokb_policy *p);

/** 0 when user is a name Slurm resolves as a name, else OP_EFORBIDDEN with the
 *  reason in *why: empty, holding white space or control characters, or
 *  numeric as Slurm's uid_from_string reads a uid (optional leading white
 *  space, an optional sign, decimal digits: "0", "00", "+0", "-0", " 0",
 *  the SlurmUser's "401"). No policy lets such a name through. */
int tokb_username_check(const char *user, char **why);

/** 0 when the Token (settings s) is within the policy, else OP_EFORBIDDEN with
 *  the reason in *why: the name as tokb_username_check; root and the
 *  SlurmUser (compared without case: a case-insensitive directory resolves
 *  "Root" as root) only when listed by name; other users when listed or
 *  with "*"; spec.lifetime at most the maximum. */
int tokb_policy_check(const tokb_policy *p, const tokb_settings *s, char **why);

/** What the Token reconciler should do now. */
typedef struct tokb_plan {
    int refresh_now;      /* mint a new JWT and patch the Secret now */
    int64_t requeue_ms;   /* requeue after this long; always >= 1000 */
    int64_t refresh_at_s; /* unix time (s) at which the current token is due */
} tokb_plan;

/** The refresh schedule (docs/compat.md#token-secret): refreshAt = exp - lifetime/5.
 *  - now >= refreshAt or now >= exp (due or expired): refresh_now = 1 and
 *    the next check in 0.8 * lifetime, at least 1 s;
 *  - otherwise: refresh_now = 0, requeue after clamp(refreshAt - now, 1 s,
 *    lifetime) (lifetime below 1 s counts as 1 s).
 *  exp_s: the stored JWT's exp claim (seconds); now_ms: wall clock (ms);
 *  lifetime_ms from tokb_settings. Never returns a requeue <= 0, whatever
 *  the inputs (a token from the future, a zero lifetime, overflow). */
tokb_plan tokb_refresh_plan(int64_t exp_s, int64_t now_ms, int64_t lifetime_ms);

#endif
