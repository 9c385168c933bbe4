#!/usr/bin/env bash
# unit_exec.sh - run a systemd unit's ExecStart= as systemd would, without systemd.
#
# usage: unit_exec.sh UNIT_FILE INSTANCE ETC_DIR CREDENTIALS_DIR [BINARY]
#
# For the tests that have no running systemd (CI, containers, network
# namespaces): tests/service/service_check.sh and tests/netns/cluster.sh start
# their workers through the installed cdcgemm-worker@.service with it.
#   - %i is INSTANCE; every path under /etc/cdcgemm is taken from ETC_DIR
#     instead (the files docs/deploy.md says to create, laid out there);
#   - each EnvironmentFile= is loaded (KEY=value lines, # comments; a leading
#     "-" makes it optional), as systemd does: no shell syntax;
#   - each LoadCredential=ID:PATH is copied to CREDENTIALS_DIR/ID (mode 0400,
#     the directory 0500) and CREDENTIALS_DIRECTORY names that directory;
#   - ExecStart= is expanded with systemd's rules: "${VAR}" is one argument,
#     a word that is exactly "$VAR" is the value split on blanks;
#   - then exec'd (same pid), with BINARY, if given, in place of the unit's
#     program (the build tree's instead of an installed one).
# Anything this does not model (quotes, line continuations, other specifiers,
# ExecStart prefixes, several ExecStart= lines) is an error, never a guess.
set -eu
if [ $# -lt 4 ]; then
  echo "usage: $0 UNIT_FILE INSTANCE ETC_DIR CREDENTIALS_DIR [BINARY]" >&2
  exit 2
fi
unit=$1 instance=$2 etc=$3 creds=$4 binary=${5:-}
die() { echo "unit_exec.sh: $unit: $*" >&2; exit 2; }
[ -r "$unit" ] || die "cannot read the unit"

subst() { # unit specifiers and the /etc/cdcgemm relocation
  local s=$1
  s=${s//%i/$instance}
  case $s in *%*) die "a specifier other than %i in: $1" ;; esac
  printf '%s' "${s//\/etc\/cdcgemm/$etc}"
}
settings() { sed -n "s/^$1=//p" "$unit"; } # every value of KEY=, in order

# EnvironmentFile=
while IFS= read -r file; do
  optional=0
  case $file in -*) optional=1 file=${file#-} ;; esac
  file=$(subst "$file")
  if [ ! -r "$file" ]; then
    [ $optional = 1 ] && continue
    die "EnvironmentFile $file: not readable (systemd would not start the unit)"
  fi
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in '' | '#'* | ';'*) continue ;; esac
    key=${line%%=*}
    [[ $key =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "$file: not KEY=value: $line"
    value=${line#*=}
    case $value in \"*\" | \'*\') value=${value:1:${#value}-2} ;; esac
    export "$key=$value"
  done <"$file"
done < <(settings EnvironmentFile)

# LoadCredential=
mkdir -p "$creds"
chmod 0700 "$creds"
while IFS= read -r credential; do
  id=${credential%%:*}
  source=$(subst "${credential#*:}")
  [ -r "$source" ] || die "LoadCredential $id: $source not readable (the unit would fail)"
  install -m 0400 "$source" "$creds/$id"
done < <(settings LoadCredential)
chmod 0500 "$creds"
export CREDENTIALS_DIRECTORY=$creds

# ExecStart=
[ "$(settings ExecStart | wc -l)" = 1 ] || die "expected one ExecStart= line"
line=$(subst "$(settings ExecStart)")
case $line in *\\ | *\"* | *\'*) die "quotes or continuations in ExecStart=: not modelled" ;; esac
case $line in [-@+!:]*) die "ExecStart= prefixes are not modelled" ;; esac
read -r -a words <<<"$line"
args=()
for word in "${words[@]}"; do
  if [[ $word =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
    read -r -a split <<<"${!BASH_REMATCH[1]-}"
    args+=("${split[@]}")
  else
    while [[ $word =~ \$\{([A-Za-z_][A-Za-z0-9_]*)\} ]]; do
      name=${BASH_REMATCH[1]}
      word=${word//"\${$name}"/"${!name-}"}
    done
    args+=("$word")
  fi
done
[ -n "$binary" ] && args[0]=$binary
exec "${args[@]}"
