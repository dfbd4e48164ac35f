#!/usr/bin/env bash
# Checks that the safety rules' tests can fail: each mutant removes one
# rule's code (in a scratch copy of the tree, never here) and the tests
# named must then fail on an assertion (a mutant that does not build does
# not count as killed). Run it after changing a rule or its tests:
#   scripts/mutants.sh            # every mutant
#   scripts/mutants.sh halt       # the mutants whose name contains "halt"
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
only=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each mutant: its name, the file, the code to replace and its
# replacement (Python string literals, so that a line break is \n and a
# tab \t), the packages and the -run pattern of the tests that must fail.
mutants() {
  cat <<'EOF'
booting capacity not counted (planner property)
planner/planner.go
"\t\t\tp.supply += gpn\n\t\t\tpp.active++\n\t\tcase fleet.Ready:"
"\t\t\tpp.active++\n\t\tcase fleet.Ready:"
./planner
TestPropertySafety

booting capacity not counted (controller)
planner/planner.go
"\t\t\tp.supply += gpn\n\t\t\tpp.active++\n\t\tcase fleet.Ready:"
"\t\t\tpp.active++\n\t\tcase fleet.Ready:"
./controller
TestBootingCapacityCounts

no silent-share halt (planner property)
planner/planner.go
"if readyNodes > 0 && float64(silent) >"
"if false && readyNodes > 0 && float64(silent) >"
./planner
TestPropertySafety

no silent-share halt (controller)
planner/planner.go
"if readyNodes > 0 && float64(silent) >"
"if false && readyNodes > 0 && float64(silent) >"
./controller
TestSilentAgentsHaltScaleIn

deadline applied to unknown instances (planner property)
planner/planner.go
"len(n.Jobs) == 0 && n.Unknown {"
"len(n.Jobs) == 0 && n.Unknown && false {"
./planner
TestPropertySafety

deadline applied to unknown instances (controller, simulated cloud)
controller/controller.go
"\t\t\tcase !own.at[in.ID].IsZero():"
"\t\t\tcase true:"
./controller
TestAdoptedFleetIsNeverKilled

deadline applied to unknown instances (controller, moto)
controller/controller.go
"\t\t\tcase !own.at[in.ID].IsZero():"
"\t\t\tcase true:"
./providers/aws
TestAdoptedFleetIsNeverKilled

spend counted at max x price (planner property)
planner/planner.go
"\t\tnodes = max(nodes, pp.spec.Max)"
"\t\tnodes = pp.spec.Max"
./planner
TestPropertySafety

spend counted at max x price (planner)
planner/planner.go
"\t\tnodes = max(nodes, pp.spec.Max)"
"\t\tnodes = pp.spec.Max"
./planner
TestSpendCountsWhatIsPaid
EOF
}

failed=0
while IFS= read -r name && IFS= read -r file && IFS= read -r old && IFS= read -r new && IFS= read -r pkgs && IFS= read -r run; do
  read -r _ || true # the blank line between mutants
  [[ -z "$only" || "$name" == *"$only"* ]] || continue
  rm -rf "$work/tree" "$work/shared" && mkdir -p "$work/tree"
  # The tree as it is, uncommitted files included.
  git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/tree" 2>/dev/null || true
  [ -d ../shared ] && ln -s "$(cd ../shared && pwd)" "$work/shared"
  if ! python3 - "$work/tree/$file" "$old" "$new" <<'PY'
import ast, sys
path, old, new = sys.argv[1], ast.literal_eval(sys.argv[2]), ast.literal_eval(sys.argv[3])
src = open(path).read()
if src.count(old) != 1:
    sys.exit(f"{path}: the code to replace occurs {src.count(old)} times, want 1 (update scripts/mutants.sh)")
open(path, "w").write(src.replace(old, new))
PY
  then echo "NOT MADE  $name"; failed=$((failed + 1)); continue; fi
  if (cd "$work/tree" && go test -count=1 -run "^${run}\$" $pkgs >"$work/out" 2>&1); then
    echo "SURVIVED  $name: go test $pkgs -run $run passes"
    failed=$((failed + 1))
  elif ! grep -q -- '--- FAIL' "$work/out"; then
    echo "NOT BUILT $name: $(grep -m1 -E 'error|cannot|undefined' "$work/out" | cut -c1-160)"
    failed=$((failed + 1))
  else
    echo "killed    $name: $(grep -m1 -E '^\s+\S+_test\.go:[0-9]+: ' "$work/out" | sed 's/^\s*//' | cut -c1-150)"
  fi
done < <(mutants)
[ "$failed" -eq 0 ] || { echo "$failed mutant(s) survived, or were not made or built"; exit 1; }
echo "every mutant killed"
