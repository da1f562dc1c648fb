#!/usr/bin/env bash
# check-imports.sh: enforces the module boundaries of docs/architecture.md#modules.
# Services never import each other; schemas imports no Tributary module; platform imports
# only schemas; analytics imports schemas at most; devstack may import everything;
# deploy/deploytest (tests of the deployment files) imports schemas and platform.
set -euo pipefail
cd "$(dirname "$0")/.."
root=github.com/tributary-cdp/tributary

allowed() { # module -> space-separated Tributary modules it may import
	case "$1" in
	schemas | tools) echo "" ;;
	platform | analytics) echo "schemas" ;;
	ingest | router | deliverer | audiences | console) echo "schemas platform" ;;
	devstack) echo "*" ;;
	deploy/deploytest) echo "schemas platform" ;;
	*) echo "" ;;
	esac
}

status=0
for mod in $(go list -m -f '{{.Path}}'); do
	name=${mod#"$root/"}
	allow=$(allowed "$name")
	[ "$allow" = "*" ] && continue
	# Every import (including test imports) of every package of the module.
	while read -r pkg imp; do
		[ -z "$imp" ] && continue
		case "$imp" in "$root"/*) ;; *) continue ;; esac
		dep=${imp#"$root/"}
		dep=${dep%%/*}
		[ "$dep" = "$name" ] && continue
		ok=false
		for a in $allow; do [ "$a" = "$dep" ] && ok=true; done
		if ! $ok; then
			echo "import boundary: $pkg imports $imp (module $name may import: ${allow:-no Tributary module})" >&2
			status=1
		fi
	done < <(go list -f '{{$p := .ImportPath}}{{range .Imports}}{{$p}} {{.}}{{"\n"}}{{end}}{{range .TestImports}}{{$p}} {{.}}{{"\n"}}{{end}}{{range .XTestImports}}{{$p}} {{.}}{{"\n"}}{{end}}' "$mod/...")
done
[ $status -eq 0 ] && echo "import boundaries: ok"
exit $status
