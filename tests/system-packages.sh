#!/usr/bin/env bash
# What the test suite needs from the system, which pip cannot install: Debian's chromium (the
# browser tests drive it through Playwright; nothing is downloaded at run time), a
# PostgreSQL server (initdb, pg_ctl, postgres: the session starts a private one), and xxd and
# hexdump (bsdextrautils: the redaction tests dump secrets with them). Installs what is missing
# with apt-get, as root or through sudo; where it cannot, it names the packages to install and
# fails, so the tests never start without them. Does nothing when all are there.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core)
command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
command -v xxd >/dev/null 2>&1 || missing+=(xxd)
command -v hexdump >/dev/null 2>&1 || missing+=(bsdextrautils)
((${#missing[@]})) || exit 0

cannot() {
  echo "The tests need ${missing[*]}, which are not installed, and $1." >&2
  echo "Install them (Debian/Ubuntu: sudo apt-get install -y ${missing[*]}), then run the tests again." >&2
  exit 1
}
command -v apt-get >/dev/null 2>&1 || cannot "this system has no apt-get"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || cannot "this user is not root and there is no sudo"
  sudo=(sudo)
fi
echo "Installing what the tests need: ${missing[*]}" >&2
"${sudo[@]}" apt-get update -qq || cannot "apt-get update failed"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" || cannot "apt-get install failed"
