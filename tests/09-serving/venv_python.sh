#!/bin/sh
# Runs one of chapter 09's Python tests with build/venv's Python (ctest, tests/09-serving/python.cmake).
# A venv that is missing, or older than tools/python-requirements.txt (install_model.sh stamps it
# with the file it installed), fails naming ./inferlab setup instead of a bare ImportError.
# Usage: venv_python.sh VENV_PYTHON REQUIREMENTS SCRIPT [ARGS…]
venv_python="$1"
requirements="$2"
shift 2
stamp="$(dirname "$(dirname "$venv_python")")/.requirements"
if [ ! -x "$venv_python" ]; then
  echo "chapter 09's Python tools are not installed ($venv_python is missing): run ./inferlab setup" >&2
  exit 1
fi
if ! cmp -s "$stamp" "$requirements"; then
  echo "build/venv was installed from another tools/python-requirements.txt than this one (openai, httpx," \
       "prometheus-client may be missing): run ./inferlab setup" >&2
  exit 1
fi
exec "$venv_python" "$@"
