#include "watchers/slinky.h"

#define SLINKY_RES(var, plural, kind) const kube_res var = {"slinky.slurm.net", "v1beta1", plural, kind, 1}
SLINKY_RES(SLINKY_CONTROLLERS, "controllers", "Controller");
SLINKY_RES(SLINKY_NODESETS, "nodesets", "NodeSet");
SLINKY_RES(SLINKY_LOGINSETS, "loginsets", "LoginSet");
SLINKY_RES(SLINKY_RESTAPIS, "restapis", "RestApi");
SLINKY_RES(SLINKY_ACCOUNTINGS, "accountings", "Accounting");
SLINKY_RES(SLINKY_TOKENS, "tokens", "Token");
