/* enforce.h — check-config's view of this machine: which statements promise what the
 * confinement tier here cannot keep (sandbox/tiers.h). Warnings only: the config may be
 * meant for another machine, and at run time such calls fail closed (confine: required)
 * or run and are recorded as not enforced (best_effort). */
#ifndef ABX_POLICY_ENFORCE_H
#define ABX_POLICY_ENFORCE_H

#include "config/config.h"
#include "core/diag.h"
#include "policy/policy.h"

/* Probe the tiers and add config.not_enforceable warnings for each statement that starts
 * processes and needs a layer this machine lacks, and for run_as other than abx's ids
 * without the capabilities to switch. */
void abx_policy_check_enforceable(const abx_policy *p, const abx_config *cfg, abx_diags *d);

#endif
