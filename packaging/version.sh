#!/bin/sh
# Prints the build's version, commit, source time (Unix seconds) and date
# (RFC 3339, UTC) on one line, for the Makefile's -ldflags -X and make deb.
#
# The version is a Debian version, which must start with a digit:
#   a tag vX.Y.Z at HEAD            X.Y.Z
#   a tag vX.Y.Z-rc1 at HEAD        X.Y.Z~rc1 (sorts before X.Y.Z)
#   N commits after the tag vX.Y.Z  X.Y.Z+git<commit time>.<hash>
#   no tag (so far)                 $1~git<commit time>.<hash>
# $1 is the release to come (BASE_VERSION): "~" sorts before it, "+" after
# the tag, and the commit's UTC time makes a later commit sort later, which
# a hash alone does not. ".dirty" marks uncommitted changes. The time is
# SOURCE_DATE_EPOCH if set, else the commit's (so the same commit builds
# the same bytes), else, in a dirty tree, now. Outside a git checkout:
# $1, commit "unknown", now.
set -eu
base=$1
if ! commit=$(git rev-parse HEAD 2>/dev/null); then
	epoch=${SOURCE_DATE_EPOCH:-$(date +%s)}
	echo "$base unknown $epoch $(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
	exit 0
fi
dirty=
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty=.dirty
fi
epoch=$(git log -1 --format=%ct HEAD)
[ -n "$dirty" ] && epoch=$(date +%s)
epoch=${SOURCE_DATE_EPOCH:-$epoch}
stamp=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
short=$(git rev-parse --short=12 HEAD)
# A pre-release's "-" becomes "~", which dpkg sorts before the release.
if tag=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null); then
	version=$(echo "${tag#v}" | tr - '~')${dirty:++dirty}
elif tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null); then
	version=$(echo "${tag#v}" | tr - '~')+git$stamp.$short$dirty
else
	version=$base~git$stamp.$short$dirty
fi
echo "$version $commit${dirty:+-dirty} $epoch $(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
