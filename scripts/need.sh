#!/usr/bin/env bash
# need.sh PACKAGE COMMAND... — print the path of the first COMMAND found, for a test
# tier that needs it (Chromium for the status page's browser tests, strace for the
# file-call tests). Debian's PACKAGE is installed when none is found and this runs as
# root with apt-get (as on the project's machines and in CI); otherwise it fails saying
# how to install it, rather than let the tests skip.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PACKAGE COMMAND..." >&2; exit 2; }
pkg=$1
shift

find_one() {
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if bin=$(find_one "$@"); then
  echo "$bin"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "$pkg: installing Debian's package for the tests that need it…" >&2
  if apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null; then
    if bin=$(find_one "$@"); then
      echo "$bin"
      exit 0
    fi
  fi
  echo "$pkg: apt-get could not install it" >&2
fi
echo "$pkg: not installed, and tests need it. Install it (Debian/Ubuntu: sudo apt-get install $pkg)." >&2
exit 1
