// Package release holds make release's and make image's scripts
// (release.sh, image.sh, the Dockerfile, and the agent's glibc 2.28
// compatibility: glibc/glibc-compat.h and glibc/glibc-start.c), and
// their test.
package release
