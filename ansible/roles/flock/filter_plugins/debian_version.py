# The flock role's filters, run on the controller: which of the packages
# `make deb` or `make release` built is the newest for the host's
# architecture, in Debian's version order (dpkg's, so 0.10.0 is newer than
# 0.9.0 and 0.2.0~rc1 older than 0.2.0). A filter of the role's own needs
# no collection.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import os
import re

# flock_<version>_<arch>.deb, as nfpm names flock's package.
_DEB_NAME = re.compile(r"^flock_([0-9][^_]*)_([a-z0-9]+)\.deb$")


def _order(c):
    """dpkg's weight of a character between digits: ~ before the end,
    the end before letters, letters before everything else."""
    if c == "" or c.isdigit():
        return 0
    if c == "~":
        return -1
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _verrevcmp(a, b):
    """dpkg's verrevcmp: alternate runs of non-digits and of digits."""
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i] if i < len(a) else "")
            bc = _order(b[j] if j < len(b) else "")
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        si = i
        while i < len(a) and a[i].isdigit():
            i += 1
        sj = j
        while j < len(b) and b[j].isdigit():
            j += 1
        na, nb = int(a[si:i] or 0), int(b[sj:j] or 0)
        if na != nb:
            return -1 if na < nb else 1
    return 0


def _split(v):
    """epoch, upstream version and Debian revision of a version."""
    epoch, _, rest = v.rpartition(":") if ":" in v else ("0", "", v)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or 0), upstream, revision


def debian_version_cmp(a, b):
    """Negative, zero or positive as version a is older than, equal to or
    newer than b, by Debian's rules (dpkg --compare-versions)."""
    ea, ua, ra = _split(a)
    eb, ub, rb = _split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _verrevcmp(ua, ub) or _verrevcmp(ra, rb)


def flock_newest_deb(dirs, arch):
    """The newest flock_<version>_<arch>.deb in dirs (a directory or a
    list of them; missing ones are skipped), or "" when there is none."""
    if isinstance(dirs, str):
        dirs = [dirs]
    found = []
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            m = _DEB_NAME.match(name)
            path = os.path.join(d, name)
            if m and m.group(2) == arch and os.path.isfile(path):
                found.append((m.group(1), path))
    if not found:
        return ""
    key = functools.cmp_to_key(lambda x, y: debian_version_cmp(x[0], y[0]) or (-1 if x[1] < y[1] else int(x[1] > y[1])))
    return os.path.normpath(max(found, key=key)[1])


class FilterModule(object):
    def filters(self):
        return {"flock_newest_deb": flock_newest_deb}
