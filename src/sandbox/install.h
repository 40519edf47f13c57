/* install.h — lazy install of the programs some ops need (the seed's chapter 06).
 *
 * An op declares requirements by name (abx_op_def.install: "codex-cli"); each name has a
 * manifest shipped with abx (install.c): the npm package, its pinned version, npm's
 * integrity hash of the tarball (sha512), and the program it provides. The first call
 * that needs a requirement installs it into <install.dir>/<name> once (callers that come
 * while it runs wait for that same install); later calls find it. The installer (npm)
 * runs confined like any process abx starts: write access to its staging folder only,
 * and the network only through an egress proxy that lets it reach the registry's host. */
#ifndef ABX_SANDBOX_INSTALL_H
#define ABX_SANDBOX_INSTALL_H

#include "sandbox/procs.h"
#include <jansson.h>
#include <stdbool.h>

typedef struct abx_install_manifest {
    const char *name;      /* the requirement's name: "codex-cli" */
    const char *package;   /* npm package */
    const char *version;   /* pinned */
    const char *integrity; /* npm's dist.integrity of that version's tarball: "sha512-<base64>" */
    const char *bin;       /* the program, relative to the install folder */
} abx_install_manifest;

const abx_install_manifest *abx_install_manifest_find(const char *name);
size_t abx_install_manifest_count(void);
const abx_install_manifest *abx_install_manifest_at(size_t i);

typedef struct abx_installer abx_installer;

/* dir: where requirements are installed (made when missing); registry: the npm registry's
 * URL (https://registry.npmjs.org/ when NULL). NULL with why. */
abx_installer *abx_installer_new(abx_procs *procs, const char *dir, const char *registry, char *why, size_t whylen);
void abx_installer_free(abx_installer *in);

/* Make sure the requirement is installed: 0 it already was (or another call that was
 * installing it finished while this one waited), 1 this call installed it, -1 it failed,
 * -2 the install this call waited for failed (why: the installer's own
 * message). res: the egress resolver table (may be NULL). */
int abx_install_ensure(abx_installer *in, const char *name, const abx_egress_resolver *res, char *why,
                       size_t whylen);

/* The installed program of a requirement (absolute), or false when it is not installed. */
bool abx_install_program(const char *dir, const char *name, char *out, size_t outlen);
/* The folder a requirement installs into. */
bool abx_install_folder(const char *dir, const char *name, char *out, size_t outlen);

/* Every manifest with its state under dir: [{name, package, version, integrity,
 * installed, verified, program, error?}] (abx install --check). *all_ok: every installed
 * one verified. */
json_t *abx_install_check(const char *dir, bool *all_ok);

/* "sha512-<base64>" of a file; false when it cannot be read. */
bool abx_install_file_integrity(const char *path, char *out, size_t outlen);

#endif
