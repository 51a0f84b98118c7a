#!/usr/bin/env bash
# Install this checkout editable with the given extras (`bash scripts/install_checkout.sh dev`),
# as scripts/test.sh and scripts/demo.sh do.
#
# The distribution was called dubbo-py before it became dubbo-grpc: an old editable install of
# that name (perhaps of another checkout) would shadow this one, so it is uninstalled first. pip
# is asked from / so that it does not take a stale dubbo_py.egg-info in this tree for an
# installed distribution; that directory goes too.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:?usage: install_checkout.sh EXTRAS (e.g. dev)}
export PIP_ROOT_USER_ACTION=ignore
if (cd / && python3 -m pip show -q dubbo-py >/dev/null 2>&1); then
  (cd / && python3 -m pip uninstall -y -q dubbo-py)
fi
rm -rf dubbo_py.egg-info
python3 -m pip install -q -e ".[$extras]"
