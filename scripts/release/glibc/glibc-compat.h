/*
 * glibc-compat.h: forced into every C file of the agent's release build
 * (CGO_CFLAGS=-include, scripts/release/release.sh), so that the binary
 * asks for no glibc symbol newer than 2.28 (Rocky and RHEL 8) although it
 * is built against Debian's newer glibc.
 *
 * glibc 2.32 and 2.34 moved libpthread's and libdl's functions into libc
 * under new symbol versions, keeping the old versions for binaries built
 * before; the linker binds an unversioned reference to the newest. Each
 * .symver below binds the references of the file it is included in to the
 * oldest version instead: the base version of the architecture (2.2.5 on
 * x86-64, 2.17 on AArch64), where old glibc defines them in libpthread.so.0
 * and libdl.so.2 (which the release's link names, so an old glibc loads
 * them). The list is what runtime/cgo and go-nvml call that has a newer
 * version; the release test fails naming any symbol over 2.28, which then
 * belongs here.
 */
#if !defined(FLEETCAST_GLIBC_COMPAT_H) && !defined(__ASSEMBLER__) /* cgo's .S files get it too */
#define FLEETCAST_GLIBC_COMPAT_H

#if defined(__x86_64__)
#define FC_GLIBC_BASE "GLIBC_2.2.5"
#define FC_GLIBC_DLINFO "GLIBC_2.3.3"
#elif defined(__aarch64__)
#define FC_GLIBC_BASE "GLIBC_2.17"
#define FC_GLIBC_DLINFO "GLIBC_2.17"
#else
#error "glibc-compat.h: the release builds linux/amd64 and linux/arm64 only"
#endif

#define FC_PIN(fn, ver) __asm__(".symver " #fn "," #fn "@" ver)

/* libdl: GLIBC_2.34 in libc since 2.34. */
FC_PIN(dlopen, FC_GLIBC_BASE);
FC_PIN(dlsym, FC_GLIBC_BASE);
FC_PIN(dlclose, FC_GLIBC_BASE);
FC_PIN(dlerror, FC_GLIBC_BASE);
FC_PIN(dlinfo, FC_GLIBC_DLINFO);

/* libpthread: GLIBC_2.34 (or 2.32) in libc since. */
FC_PIN(pthread_create, FC_GLIBC_BASE);
FC_PIN(pthread_detach, FC_GLIBC_BASE);
FC_PIN(pthread_join, FC_GLIBC_BASE);
FC_PIN(pthread_key_create, FC_GLIBC_BASE);
FC_PIN(pthread_setspecific, FC_GLIBC_BASE);
FC_PIN(pthread_getspecific, FC_GLIBC_BASE);
FC_PIN(pthread_attr_getstack, FC_GLIBC_BASE);
FC_PIN(pthread_attr_getstacksize, FC_GLIBC_BASE);
FC_PIN(pthread_attr_setstacksize, FC_GLIBC_BASE);
FC_PIN(pthread_getattr_np, FC_GLIBC_BASE);
FC_PIN(pthread_sigmask, FC_GLIBC_BASE);
FC_PIN(pthread_mutex_trylock, FC_GLIBC_BASE);

#endif
