#!/bin/sh
# Prints the package's Debian changelog (usr/share/doc/flock/changelog.gz,
# which Debian policy asks of every package): one entry, for the version
# make computed (packaging/version.sh), signed by the maintainer that
# nfpm.yaml names, dated at the commit's time, so the same commit makes
# the same bytes. flock's history is its git log; the entry says which
# commit this is.
#   changelog.sh VERSION COMMIT EPOCH
set -eu
version=$1 commit=$2 epoch=$3
maintainer=$(sed -n 's/^maintainer: *//p' "$(dirname "$0")/nfpm.yaml")
[ -n "$maintainer" ] || { echo "changelog.sh: no maintainer: in nfpm.yaml" >&2; exit 1; }
cat <<END
flock ($version) unstable; urgency=medium

  * Built from https://github.com/flockrun/flock at commit
    $commit;
    its git log there is the history of this release.

 -- $maintainer  $(LC_ALL=C date -u -R -d "@$epoch")
END
