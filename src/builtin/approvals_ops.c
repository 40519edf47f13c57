/* approvals_ops.c — the approvals namespace: approvers list and decide held calls;
 * requesters (and approvers) poll them. Deciding needs role approver besides being
 * mounted (approvals.decide is explicit-only, like every admin op). */
#include "builtin/builtin.h"
#include <string.h>

static bool has_role(abx_ctx *ctx, const char *role)
{
    abx_request *q = builtin_req(ctx);
    if (q->slot < 0 || q->slot >= (int)q->policy->n_principals)
        return false;
    const abx_principal *pr = &q->policy->principals[q->slot];
    for (size_t i = 0; i < pr->n_roles; i++)
        if (strcmp(pr->roles[i], role) == 0)
            return true;
    return false;
}

static abx_err approvals_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_reply_json(r, abx_approvals_list(builtin_req(ctx)->server, abx_ctx_principal(ctx), has_role(ctx, "approver")));
    return ABX_OK;
}

static abx_err approvals_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    return abx_approval_get(builtin_req(ctx)->server, json_string_value(json_object_get(args, "id")),
                            abx_ctx_principal(ctx), has_role(ctx, "approver"), r);
}

static abx_err approvals_decide(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    if (!has_role(ctx, "approver"))
        return abx_reply_error(r, ABX_E_POLICY_DENIED, NULL, "deciding held calls needs role approver");
    const char *decision = json_string_value(json_object_get(args, "decision"));
    return abx_approval_decide(builtin_req(ctx)->server, json_string_value(json_object_get(args, "id")),
                               abx_ctx_principal(ctx), strcmp(decision, "approve") == 0,
                               json_string_value(json_object_get(args, "reason")), r);
}

static const abx_param id_params[] = {{"id", ABX_T_STRING, .required = true, .doc = "Approval id"}, {0}};
static const abx_param decide_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Approval id"},
    {"decision", ABX_T_ENUM, .required = true, .choices = "approve|deny", .doc = "approve or deny"},
    {"reason", ABX_T_STRING, .doc = "Why (recorded in the ledger)"},
    {0},
};

static const abx_op_def approvals_ops[] = {
    {.id = "approvals.list", .effects = ABX_EFF_READ,
     .summary = "Held calls: approvers see all, others their own (pending and recent).", .http = {"GET /approvals"},
     .since = "0.1", .handler = approvals_list},
    {.id = "approvals.get", .effects = ABX_EFF_READ,
     .summary = "Poll a held call: 202 while pending, then the held call's own status and result.",
     .http = {"GET /approvals/{id}"}, .params = id_params, .since = "0.1",
     .errors = "approval.not_found", .handler = approvals_get},
    {.id = "approvals.decide", .effects = ABX_EFF_ADMIN,
     .summary = "Approve or deny a held call (role approver; not one's own); approved calls run exactly once.",
     .http = {"POST /approvals/{id}"}, .params = decide_params, .since = "0.1",
     .errors = "approval.not_found approval.self_approval approval.expired approval.already_decided",
     .handler = approvals_decide},
    {0},
};

const abx_namespace abx_ns_approvals = {.name = "approvals", .ops = approvals_ops};
