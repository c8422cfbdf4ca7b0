#!/usr/bin/env bash
# The Debian packages the tests drive as real programs, installed when missing:
#   graphviz   `dot`, which the README's `snakemake --dag dot export | dot -Tsvg` pipes into
#   chromium   the browser the viewer and calibration page tests drive (Playwright)
# (The SLURM tests install their cluster themselves: scripts/slurm_cluster.sh install.)
# As root with apt-get, installs what is missing; otherwise names it and fails.
set -euo pipefail

PACKAGES=(graphviz chromium)

missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "system_packages: the tests need the Debian packages: ${missing[*]}" >&2
    echo "  install them (sudo apt-get install --no-install-recommends ${missing[*]}) and rerun" >&2
    exit 1
fi
echo "system_packages: apt-get install ${missing[*]}" >&2
# refresh the lists only when they do not know a package yet
if apt-cache policy "${missing[@]}" | grep -q "Candidate: (none)"; then
    apt-get update -qq
fi
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
