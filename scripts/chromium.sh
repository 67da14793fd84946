#!/usr/bin/env bash
# Make sure headless Chromium is there for the status page's browser tests
# (shared/api), and print its path. Debian's package is installed when it is missing
# and this runs as root with apt-get (as on the project's machines and in CI);
# otherwise it fails, saying how to install it, rather than let the tests skip.
set -euo pipefail

find_chromium() {
  for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if bin=$(find_chromium); then
  echo "$bin"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium: installing Debian's package for the status page's browser tests…" >&2
  if apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; then
    if bin=$(find_chromium); then
      echo "$bin"
      exit 0
    fi
  fi
  echo "chromium: apt-get could not install it" >&2
fi
echo "chromium: not installed, and the status page's browser tests need it." >&2
echo "  Install it (Debian/Ubuntu: sudo apt-get install chromium), or set" >&2
echo "  MIRRORFLEET_CHROMIUM to a Chromium or Chrome binary." >&2
exit 1
