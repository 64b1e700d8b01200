# Sourced by the deps scripts (POSIX sh) before they install with apt-get,
# after they set name (the prefix of their messages), no_apt (what to do
# without apt-get), no_root (what to do without root or sudo) and
# installing (what is installed). It exits 1 saying no_apt or no_root when
# it cannot install; otherwise it sets sudo ("" as root), says what it
# installs and updates the package lists.
if ! command -v apt-get >/dev/null 2>&1; then
	echo "$name: $no_apt" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo="sudo"
	else
		echo "$name: $no_root" >&2
		exit 1
	fi
fi
echo "$name: installing $installing with apt-get"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
