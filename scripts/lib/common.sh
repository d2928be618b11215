# shellcheck shell=bash
# Helpers shared by scripts/test and scripts/install-pgvector. Source it; do not run it.
# Everything here is set -euo pipefail clean.

MARLOWE_BOLD=""; MARLOWE_RED=""; MARLOWE_YEL=""; MARLOWE_OFF=""
if [ -t 2 ] && [ -z "${NO_COLOR:-}" ]; then
  MARLOWE_BOLD=$'\e[1m'; MARLOWE_RED=$'\e[31m'; MARLOWE_YEL=$'\e[33m'; MARLOWE_OFF=$'\e[0m'
fi

# say MSG...: progress line on stderr, prefixed with the calling script's name.
say() { printf '%s[%s]%s %s\n' "$MARLOWE_BOLD" "${MARLOWE_SCRIPT:-marlowe}" "$MARLOWE_OFF" "$*" >&2; }
warn() { printf '%s[%s] WARNING:%s %s\n' "$MARLOWE_YEL" "${MARLOWE_SCRIPT:-marlowe}" "$MARLOWE_OFF" "$*" >&2; }
die() { printf '%s[%s] ERROR:%s %s\n' "$MARLOWE_RED" "${MARLOWE_SCRIPT:-marlowe}" "$MARLOWE_OFF" "$*" >&2; exit "${DIE_STATUS:-1}"; }

# banner TITLE LINE...: a loud, hard-to-miss block on stderr.
banner() {
  local title=$1 line; shift
  {
    printf '\n%s%s' "$MARLOWE_YEL" "$MARLOWE_BOLD"
    printf '%s\n' '################################################################################'
    printf '###  %s\n' "$title"
    printf '%s\n' '###'
    for line in "$@"; do
      while IFS= read -r l; do printf '###  %s\n' "$l"; done <<<"$line"
    done
    printf '%s' '################################################################################'
    printf '%s\n\n' "$MARLOWE_OFF"
  } >&2
}

is_root() { [ "$(id -u)" -eq 0 ]; }
is_debian() { [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1; }

# pkg_installed NAME: the Debian package is installed.
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# apt_has_candidate NAME: apt knows an installable version of NAME.
apt_has_candidate() {
  local c
  c=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
  [ -n "$c" ] && [ "$c" != "(none)" ]
}

MARLOWE_APT_UPDATED=0
apt_update_once() {
  [ "$MARLOWE_APT_UPDATED" = 1 ] && return 0
  say "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update >&2
  MARLOWE_APT_UPDATED=1
}

# apt_install PKG...: installs the packages that are not installed yet.
# Runs `apt-get update` first when one of them has no candidate, and once more
# (then retries) when the install itself fails, e.g. on stale package lists.
apt_install() {
  local p missing=()
  for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done
  [ "${#missing[@]}" -eq 0 ] && return 0
  for p in "${missing[@]}"; do
    if ! apt_has_candidate "$p"; then apt_update_once; break; fi
  done
  say "apt-get install ${missing[*]}"
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 "${missing[@]}" >&2; then
    return 0
  fi
  [ "$MARLOWE_APT_UPDATED" = 1 ] && return 1
  apt_update_once
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 "${missing[@]}" >&2
}
