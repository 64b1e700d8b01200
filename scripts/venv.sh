# Sourced by pinned-venv.sh and py-venv.sh (POSIX sh), which set venv (the
# venv's directory), req (its pinned requirements), stamp (the copy of req
# that marks a venv made whole) and name (the prefix of their messages).

# venv_current prints the venv's python and exits when the venv holds
# req's pins; otherwise it returns, after checking python3 is there.
venv_current() {
	if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
		echo "$venv/bin/python"
		exit 0
	fi
	if ! command -v python3 >/dev/null 2>&1; then
		echo "$name: python3 is missing: apt-get install python3 python3-venv (scripts/deps.sh does)" >&2
		exit 1
	fi
}

# venv_create makes the venv afresh from $base (python3 when unset),
# saying so with $1 after the Python's version.
venv_create() {
	py=${base:-python3}
	echo "$name: creating $venv with $py, $("$py" --version 2>&1)$1" >&2
	if ! "$py" -m venv --clear "$venv" >&2; then
		echo "$name: python3 -m venv failed: apt-get install python3-venv (scripts/deps.sh does)" >&2
		exit 1
	fi
}

# venv_stamp marks the venv as made from req and prints its python.
venv_stamp() {
	cp "$req" "$stamp"
	echo "$venv/bin/python"
}
