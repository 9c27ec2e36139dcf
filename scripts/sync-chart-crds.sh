#!/usr/bin/env bash
# Copy the CRDs (single source of truth: crds/) into the Helm chart's crds/ folder.
# tests/controlplane/test_chart.py fails when the two differ; run this after editing crds/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/charts/spindle/crds"
mkdir -p "$DEST"
find "$DEST" -maxdepth 1 -name '*.yaml' -delete
cp "$ROOT"/crds/*.yaml "$DEST/"
echo "copied $(find "$DEST" -maxdepth 1 -name "*.yaml" | wc -l) CRDs into charts/spindle/crds/"
