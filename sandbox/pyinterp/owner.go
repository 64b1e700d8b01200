package pyinterp

import (
	"os"
	"syscall"
)

type owner struct{ uid, gid int }

// statOwner returns the owner of fi's file.
func statOwner(fi os.FileInfo) (owner, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return owner{}, false
	}
	return owner{int(st.Uid), int(st.Gid)}, true
}
