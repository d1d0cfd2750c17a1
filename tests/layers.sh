#!/bin/bash
# The layers of DESIGN.md section 2, as the includes of src/ show them: a
# directory may include only its own headers and those of the layers below
# it. Prints each include that reaches upward and fails if there is one.
set -u
src=${1:?usage: layers.sh SRC_DIR}
# what each layer may include (besides itself)
declare -A may=(
  [util]=""
  [wire]="util"
  [link]="wire util"
  [boot]="wire util"
  [reg]="link boot wire util"
  [core]="reg link boot wire util"
  [svc]="core reg link boot wire util"
  [gmem]="svc core reg link boot wire util"
  [preload]="gmem svc core reg link boot wire util"
)
bad=0
for layer in "${!may[@]}"; do
  [ -d "$src/$layer" ] || continue
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$line")
    [ "$inc" = "$layer" ] && continue
    case " ${may[$layer]} " in *" $inc "*) continue ;; esac
    echo "layer violation: $file includes $inc/ (${layer} may include: ${may[$layer]:-nothing below it})"
    bad=1
  done < <(grep -rHE '^#include "[a-z_]+/' "$src/$layer")
done
[ $bad -eq 0 ] && echo "layers ok"
exit $bad
