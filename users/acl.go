package users

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// A default ACL on common/ gives the shared group rwX on everything created
// inside, whatever the creator's umask (agents run with UMask=0077): with a
// default ACL the kernel ignores the umask and applies the ACL instead.
// The xattr is the kernel's binary form (linux/posix_acl_xattr.h), written
// directly so flock needs no setfacl.

const (
	aclXattrDefault = "system.posix_acl_default"
	aclVersion      = 2
	aclUserObj      = 0x01
	aclGroupObj     = 0x04
	aclGroup        = 0x08
	aclMask         = 0x10
	aclOther        = 0x20
	aclUndefinedID  = 0xFFFFFFFF
	aclRWX          = 7
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// groupRWDefaultACL is u::rwx g::rwx g:GID:rwx m::rwx o::--- (kernel order:
// by tag, then id).
func groupRWDefaultACL(gid uint32) []byte {
	entries := []aclEntry{
		{aclUserObj, aclRWX, aclUndefinedID},
		{aclGroupObj, aclRWX, aclUndefinedID},
		{aclGroup, aclRWX, gid},
		{aclMask, aclRWX, aclUndefinedID},
		{aclOther, 0, aclUndefinedID},
	}
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// defaultGroupRW reads path's default ACL and returns the gid it gives rwx,
// or nil when there is no such ACL.
func defaultGroupRW(path string) (*uint32, error) {
	buf := make([]byte, 512)
	n, err := unix.Lgetxattr(path, aclXattrDefault, buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EOPNOTSUPP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading default ACL of %s: %w", path, err)
	}
	buf = buf[:n]
	if len(buf) < 4 || binary.LittleEndian.Uint32(buf) != aclVersion || (len(buf)-4)%8 != 0 {
		return nil, nil
	}
	for off := 4; off < len(buf); off += 8 {
		tag := binary.LittleEndian.Uint16(buf[off:])
		perm := binary.LittleEndian.Uint16(buf[off+2:])
		id := binary.LittleEndian.Uint32(buf[off+4:])
		if tag == aclGroup && perm == aclRWX {
			// Only the exact ACL flock writes counts as flock's.
			if string(buf) != string(groupRWDefaultACL(id)) {
				return nil, nil
			}
			return &id, nil
		}
	}
	return nil, nil
}

func setDefaultGroupRW(path string, gid uint32) error {
	if err := unix.Setxattr(path, aclXattrDefault, groupRWDefaultACL(gid), 0); err != nil {
		return fmt.Errorf("setting default ACL group %d rwx on %s: %w", gid, path, err)
	}
	return nil
}

func getxattr(path, name string, buf []byte) (int, error) { return unix.Getxattr(path, name, buf) }
