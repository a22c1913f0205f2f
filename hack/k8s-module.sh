# k8s-module.sh, sourced: k8s_module DIR VERSION makes DIR a throwaway Go
# module that requires k8s.io/kubernetes at VERSION (1.MINOR.PATCH), for
# building its commands or reading its packages. k8s.io/kubernetes maps its
# k8s.io/* staging modules to ./staging at v0.0.0, so the module replaces
# each with its published v0.MINOR.PATCH.
k8s_module() {
  local dir=$1 ver=$2 minor patch modfile
  minor=$(cut -d. -f2 <<<"$ver"); patch=$(cut -d. -f3 <<<"$ver")
  mkdir -p "$dir"
  (
    cd "$dir"
    go mod init kipk8s >/dev/null 2>&1
    modfile=$(go mod download -json "k8s.io/kubernetes@v$ver" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    {
      echo "require k8s.io/kubernetes v$ver"
      echo "replace ("
      grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging' "$modfile" | awk -v v="v0.$minor.$patch" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } >>go.mod
  )
}
