#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# The license (MIT) is stated everywhere a user or a packager looks: LICENSE, an SPDX
# line in every source file, the packaging recipes, --version. No server needed.

bats_require_minimum_version 1.5.0

load helpers

setup_file() { rlock_require_binary; }
teardown_file() { :; }
setup() { src=$RLOCK_SOURCE_DIR; }
teardown() { :; }

@test "LICENSE is the MIT license" {
	grep -q '^MIT License$' "$src/LICENSE" || fail "LICENSE is not MIT"
	grep -q 'Permission is hereby granted, free of charge' "$src/LICENSE" ||
		fail "LICENSE lacks the MIT permission notice"
}

@test "every source file carries an SPDX-License-Identifier: MIT line" {
	local f missing=()
	for f in "$src"/src/*/*.[ch] "$src"/src/*/*.in "$src"/src/store/lua/*.lua "$src"/test/unit_*.c \
		"$src"/fuzz/*.c "$src"/scripts/* "$src"/completions/* "$src"/CMakeLists.txt \
		"$src"/man/rlock.1 "$src"/man/rlock.conf.5 "$src"/man/rlock-protocol.7; do
		[[ -f $f ]] || continue
		head -n 3 "$f" | grep -q 'SPDX-License-Identifier: MIT' || missing+=("${f#"$src"/}")
	done
	((${#missing[@]} == 0)) || fail "no SPDX line in: ${missing[*]}"
}

@test "packaging recipes say MIT" {
	local p=$src/packaging
	grep -qE '^License:[[:space:]]+MIT$' "$p/rpm/rlock.spec" || fail "rlock.spec"
	grep -q '^%license LICENSE$' "$p/rpm/rlock.spec" || fail "rlock.spec lacks %license"
	grep -qx "license=('MIT')" "$p/arch/PKGBUILD" || fail "PKGBUILD"
	# shellcheck disable=SC2016 # a literal $pkgname
	grep -qF 'usr/share/licenses/$pkgname/LICENSE' "$p/arch/PKGBUILD" ||
		fail "PKGBUILD does not install the license text"
	grep -qx 'license="MIT"' "$p/alpine/APKBUILD" || fail "APKBUILD"
	grep -qx '  license "MIT"' "$p/homebrew/rlock.rb" || fail "rlock.rb"
	# DEP-5: every Files paragraph is MIT and the text is there once.
	run -0 grep -c '^License: MIT$' "$p/debian/copyright"
	((output >= 2)) || fail "debian/copyright: $output License: MIT lines"
	! grep -q 'TBD' "$p/debian/copyright" || fail "debian/copyright still says TBD"
	grep -q '^ Permission is hereby granted' "$p/debian/copyright" ||
		fail "debian/copyright lacks the license text"
}

@test "--version names the license" {
	run -0 rlock --version
	assert_line --partial 'License MIT'
}
