/* loginset: the LoginSet reconciler (docs/compat.md#loginset-objects).
 *
 * For each LoginSet CR, in order: the immutable Secret
 * `<name>-ssh-host-keys` (RSA 4096 and ECDSA P-256 host keys, generated
 * once), the ConfigMap `<name>-ssh-config` (sshd_config, authorized_keys),
 * the Service `<name>` (port "login", 22) and the Deployment `<name>` of
 * login pods. Status: replicas (the Deployment's) and the label selector of
 * the pods (for the scale subresource).
 *
 * Host keys. Generating an RSA 4096 key takes seconds, so it runs on the uv
 * threadpool (uv_queue_work). A pass that finds the Secret missing starts
 * one generation for the LoginSet, unless one is running already, and skips
 * the Deployment (its pods mount the keys and hash them); the completion
 * queues the LoginSet, whose next pass creates the Secret from the keys and
 * then the Deployment. The keys are kept in memory until the Secret shows up
 * in the cache, so a failed create is retried with the same keys. The
 * Secret is never patched (it is immutable; delete it to get new keys).
 *
 * Watches: the CR; its Deployment, Service, ConfigMap and Secret; its
 * Controller; a Secret named by its sssdConfRef or holding its Controller's
 * keys. No periodic requeue.
 */
#ifndef OP_LOGINSET_H
#define OP_LOGINSET_H

#include "reconcilers/operator.h"

#define LOGINSET_CONTROLLER "loginset-controller"

extern const op_reconciler RC_LOGINSET;

/** The reconciler's own state (its crc_module and the host key generations),
 *  made before setup and freed once the operator's client has closed,
 *  through the registry (RC_LOGINSET). It is freed late (free_late): a
 *  generation still on the threadpool keeps it until its completion, which
 *  then frees it. */
typedef struct loginset_state loginset_state;
/** op's (never NULL from op_start on). */
loginset_state *loginset_of(const operator *op);

/** Host key generations running on the threadpool (for tests and shutdown). */
int loginset_keygen_running(const loginset_state *ls);

#endif
