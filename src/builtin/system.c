/* system.c — the system namespace: what the machine is (system.info), allowlisted
 * environment variables (system.env.get), policy reload (explicit-only) and the
 * caller's private HOME (system.home.delete). */
#include "builtin/builtin.h"
#include "sandbox/jail.h"
#include "sandbox/tiers.h"
#include <errno.h>
#include <linux/landlock.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

int abx_landlock_abi(void)
{
#ifdef SYS_landlock_create_ruleset
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi > 0 ? (int)abi : 0;
#else
    return 0;
#endif
}

static abx_err system_info(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_server_facts s;
    abx_ctx_server_facts(ctx, &s);
    struct utsname u;
    struct sysinfo si;
    struct statvfs vf;
    uname(&u);
    sysinfo(&si);
    json_t *disk = json_null();
    if (statvfs(s.workspace, &vf) == 0)
        disk = json_pack("{s:s, s:I, s:I}", "path", s.workspace, "total_bytes",
                         (json_int_t)((uint64_t)vf.f_blocks * vf.f_frsize), "free_bytes",
                         (json_int_t)((uint64_t)vf.f_bavail * vf.f_frsize));
    abx_sandbox *sb = abx_procs_sandbox(abx_ctx_procs(ctx));
    static const abx_sandbox_caps none;
    const abx_sandbox_caps *c = sb ? abx_sandbox_caps_get(sb) : &none;
    json_t *conf = json_pack("{s:s, s:b, s:i, s:b, s:b, s:b, s:b, s:i, s:b, s:b, s:s}", "mode",
                             abx_procs_confine_required(abx_ctx_procs(ctx)) ? "required" : "best_effort", "landlock",
                             c->landlock_abi > 0,
                             "landlock_abi", c->landlock_abi, "network_namespace", c->netns, "mount_namespace",
                             c->mntns, "cgroup_pids", c->cgroup_pids, "cgroup_memory", c->cgroup_memory,
                             "cgroup_version", c->cgroup_version, "cgroup_cpu", c->cgroup_cpu, "openat2", abx_jail_available(), "missing",
                             sb ? abx_sandbox_missing(sb) : "everything (the sandbox could not be built)");
    json_object_set_new(conf, "seccomp", json_boolean(c->seccomp));
    json_object_set_new(conf, "watchdog", json_boolean(c->watchdog));
    /* network namespaces made ahead of the processes that take them (netpool.c) */
    bool reuse;
    unsigned long made, reused;
    abx_sandbox_netpool_stats(sb, &reuse, &made, &reused);
    json_object_set_new(conf, "network_namespaces",
                        json_pack("{s:b, s:I, s:I}", "reuse", reuse, "made_ahead", (json_int_t)made, "reused",
                                  (json_int_t)reused));
    /* confinements prepared once and used by one process at a time (slots.c), and the
     * processes made ahead for them (spare.c) */
    abx_slot_stats st;
    abx_sandbox_slot_stats(sb, &st);
    json_object_set_new(conf, "prepared_confinement",
                        json_pack("{s:b, s:I, s:I, s:I, s:I}", "on", st.on, "made", (json_int_t)st.made, "reused",
                                  (json_int_t)st.reused, "spares_made", (json_int_t)st.spares_made, "spares_used",
                                  (json_int_t)st.spares_used));
    /* the tier and each layer: active, unavailable (why) or not needed */
    if (sb) {
        json_t *t = abx_tiers_json(abx_sandbox_tiers(sb));
        json_object_update(conf, t);
        json_decref(t);
    } else {
        json_object_set_new(conf, "tier", json_string("none"));
    }
    json_t *o = json_pack(
        "{s:{s:s, s:s, s:s}, s:i, s:{s:I, s:I}, s:o, s:I, s:{s:s, s:I}, s:o}", "os", "name", u.sysname,
        "kernel", u.release, "arch", u.machine, "cpus", (int)sysconf(_SC_NPROCESSORS_ONLN), "memory", "total_bytes",
        (json_int_t)((uint64_t)si.totalram * si.mem_unit), "available_bytes",
        (json_int_t)((uint64_t)(si.freeram + si.bufferram) * si.mem_unit), "disk", disk, "uptime_s",
        (json_int_t)si.uptime, "abx", "version", ABX_VERSION, "uptime_s",
        (json_int_t)((abx_now_ms() - s.started_ms) / 1000), "confinement", conf);
    abx_reply_json(r, o);
    return ABX_OK;
}

static abx_err system_env_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_server_facts s;
    abx_ctx_server_facts(ctx, &s);
    const json_t *names = json_object_get(args, "names");
    json_t *out = json_object();
    for (size_t i = 0; i < s.n_system_env; i++) {
        const char *n = s.system_env[i];
        bool wanted = !json_array_size(names);
        size_t k;
        json_t *v;
        json_array_foreach(names, k, v) wanted = wanted || strcmp(json_string_value(v), n) == 0;
        if (!wanted)
            continue;
        const char *val = getenv(n);
        json_object_set_new(out, n, val ? json_string(val) : json_null());
    }
    /* names outside the allowlist are refused, never silently dropped */
    size_t k;
    json_t *v;
    json_array_foreach(names, k, v)
    {
        bool allowed = false;
        for (size_t i = 0; i < s.n_system_env; i++)
            allowed = allowed || strcmp(s.system_env[i], json_string_value(v)) == 0;
        if (!allowed) {
            json_decref(out);
            return abx_reply_error(r, ABX_E_POLICY_DENIED, NULL,
                                   "variable '%s' is not in the config's system.env allowlist",
                                   json_string_value(v));
        }
    }
    abx_reply_json(r, json_pack("{s:o}", "env", out));
    return ABX_OK;
}

static abx_err system_policy_reload(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_diags d = {0};
    int rc = abx_ctx_reload(ctx, &d);
    json_t *diags = json_array();
    for (size_t i = 0; i < d.n; i++)
        json_array_append_new(diags, json_pack("{s:s, s:s, s:i, s:s}", "level", d.items[i].level, "code",
                                               d.items[i].code, "line", d.items[i].line, "message",
                                               d.items[i].message));
    abx_log(rc == 0 ? "info" : "error", abx_ctx_request_id(ctx), "policy reload %s (%zu diagnostics)", rc == 0 ? "done" : "refused",
            d.n);
    abx_diags_release(&d);
    if (rc != 0)
        return abx_reply_error(r, ABX_E_CONFIG_RELOAD_FAILED, json_pack("{s:o}", "diagnostics", diags),
                               "the config has errors; the policy in force is unchanged");
    abx_reply_json(r, json_pack("{s:b, s:o}", "reloaded", 1, "diagnostics", diags));
    return ABX_OK;
}

/* The caller's private HOME (sandbox/homes.c) goes with everything in it; the next
 * process it starts gets a fresh, empty one. */
static abx_err system_home_delete(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    (void)args;
    int rc = abx_procs_home_clean(abx_ctx_procs(ctx), abx_ctx_principal(ctx));
    if (rc < 0)
        return abx_reply_error(r, abx_err_from_errno(errno), NULL, "cannot remove the private HOME: %s",
                               strerror(errno));
    abx_ctx_log(ctx, "info", "private HOME of %s %s", abx_ctx_principal(ctx), rc ? "removed" : "was absent");
    abx_reply_json(r, json_pack("{s:b}", "removed", rc > 0));
    return ABX_OK;
}

static const abx_param env_params[] = {
    {"names", ABX_T_LIST, .item = ABX_T_STRING, .doc = "Variables to read (default: every allowlisted one)"},
    {0},
};

/* results: what each op answers */
static const abx_param info_os_fields[] = {
    {"name", ABX_T_STRING, .required = true}, {"kernel", ABX_T_STRING, .required = true},
    {"arch", ABX_T_STRING, .required = true}, {0},
};
static const abx_param info_memory_fields[] = {
    {"total_bytes", ABX_T_INT, .required = true}, {"available_bytes", ABX_T_INT, .required = true}, {0},
};
static const abx_param info_disk_fields[] = {
    {"path", ABX_T_STRING, .required = true}, {"total_bytes", ABX_T_INT, .required = true},
    {"free_bytes", ABX_T_INT, .required = true}, {0},
};
static const abx_param info_abx_fields[] = {
    {"version", ABX_T_STRING, .required = true}, {"uptime_s", ABX_T_INT, .required = true}, {0},
};

static const abx_param info_result[] = {
    {"os", ABX_T_OBJECT, .required = true, .fields = info_os_fields},
    {"cpus", ABX_T_INT, .required = true},
    {"memory", ABX_T_OBJECT, .required = true, .fields = info_memory_fields},
    {"disk", ABX_T_OBJECT, .required = true, .nullable = true, .fields = info_disk_fields},
    {"uptime_s", ABX_T_INT, .required = true},
    {"abx", ABX_T_OBJECT, .required = true, .fields = info_abx_fields},
    {"confinement", ABX_T_MAP, ABX_T_ANY, .required = true, .doc = "mode, tier, and each layer's state"},
    {0},
};

static const abx_param env_result[] = {
    {"env", ABX_T_MAP, ABX_T_ANY, .required = true, .doc = "Name to value (null: unset)"},
    {0},
};

static const abx_param reload_diag_fields[] = {
    {"level", ABX_T_STRING, .required = true}, {"code", ABX_T_STRING, .required = true},
    {"line", ABX_T_INT, .required = true}, {"message", ABX_T_STRING, .required = true}, {0},
};

static const abx_param reload_result[] = {
    {"reloaded", ABX_T_BOOL, .required = true},
    {"diagnostics", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = reload_diag_fields},
    {0},
};

static const abx_param home_delete_result[] = {
    {"removed", ABX_T_BOOL, .required = true, .doc = "false: there was no home to remove"},
    {0},
};

static const abx_op_def system_ops[] = {
    {.id = "system.info", .result = info_result, .effects = ABX_EFF_READ,
     .summary = "OS, kernel, CPUs, memory, workspace disk, uptime, abx version, confinement available.",
     .http = {"GET /system/info"}, .since = "0.1", .handler = system_info},
    {.id = "system.env.get", .result = env_result, .effects = ABX_EFF_READ,
     .summary = "Values of the environment variables the config's system.env allowlists.",
     .http = {"GET /system/env"}, .params = env_params, .since = "0.1", .handler = system_env_get},
    {.id = "system.policy.reload", .result = reload_result, .effects = ABX_EFF_ADMIN,
     .summary = "Re-read the config file and swap the policy atomically; a broken file keeps the old policy.",
     .http = {"POST /system/policy/reload"}, .since = "0.1",
     .errors = "config.reload_failed", .handler = system_policy_reload},
    {.id = "system.home.delete", .result = home_delete_result, .effects = ABX_EFF_DELETE,
     .summary = "Remove the caller's private HOME (dotfiles, caches, histories); the next process gets an empty one.",
     .http = {"DELETE /system/home"}, .since = "0.2", .handler = system_home_delete},
    {0},
};

const abx_namespace abx_ns_system = {.name = "system", .ops = system_ops};
