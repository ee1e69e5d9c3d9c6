# SPDX-License-Identifier: MIT
# Install rules: binary, TLS module, man pages and shell completions (GNUInstallDirs
# paths).
# Included from the top-level CMakeLists.txt, which already includes GNUInstallDirs.
#
# The completion directories are cache variables so that distributions can move them,
# e.g. Debian's zsh searches share/zsh/vendor-completions, not share/zsh/site-functions:
#   cmake -DRLOCK_ZSH_COMPLETION_DIR=share/zsh/vendor-completions ...
# Relative paths are taken relative to CMAKE_INSTALL_PREFIX; an empty value skips
# that shell.

set(RLOCK_BASH_COMPLETION_DIR "${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions"
    CACHE STRING "where to install the bash completion (empty: do not install)")
set(RLOCK_ZSH_COMPLETION_DIR "${CMAKE_INSTALL_DATAROOTDIR}/zsh/site-functions"
    CACHE STRING "where to install the zsh completion (empty: do not install)")
set(RLOCK_FISH_COMPLETION_DIR "${CMAKE_INSTALL_DATAROOTDIR}/fish/vendor_completions.d"
    CACHE STRING "where to install the fish completion (empty: do not install)")
option(RLOCK_INSTALL_DOCS "install README, CONTRIBUTING, CHANGELOG, SECURITY and docs/ into DOCDIR" ON)

install(TARGETS rlock RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The TLS module is private to rlock (no SONAME, not for linking): LIBDIR/rlock, the
# directory compiled into rlock as RLOCK_TLS_MODULE_DIR.
install(TARGETS rlock-tls LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/rlock)

# rlock(1), the configuration file rlock.conf(5), the keys and protocol rlock-protocol(7).
install(FILES ${PROJECT_SOURCE_DIR}/man/rlock.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/man/rlock.conf.5
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
install(FILES ${PROJECT_SOURCE_DIR}/man/rlock-protocol.7
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man7)

if(RLOCK_BASH_COMPLETION_DIR)
  # bash-completion loads completions/NAME on demand: the file is called just "rlock".
  install(FILES ${PROJECT_SOURCE_DIR}/completions/rlock.bash
          DESTINATION ${RLOCK_BASH_COMPLETION_DIR} RENAME rlock)
endif()
if(RLOCK_ZSH_COMPLETION_DIR)
  install(FILES ${PROJECT_SOURCE_DIR}/completions/_rlock
          DESTINATION ${RLOCK_ZSH_COMPLETION_DIR})
endif()
if(RLOCK_FISH_COMPLETION_DIR)
  install(FILES ${PROJECT_SOURCE_DIR}/completions/rlock.fish
          DESTINATION ${RLOCK_FISH_COMPLETION_DIR})
endif()

if(RLOCK_INSTALL_DOCS)
  foreach(doc README.md CONTRIBUTING.md CHANGELOG.md SECURITY.md LICENSE)
    if(EXISTS ${PROJECT_SOURCE_DIR}/${doc})
      install(FILES ${PROJECT_SOURCE_DIR}/${doc} DESTINATION ${CMAKE_INSTALL_DOCDIR})
    endif()
  endforeach()
  # the pages the README links to, where its links (docs/NAME.md) find them
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
          FILES_MATCHING PATTERN "*.md")
endif()

# Release tarball: `cpack --config CPackSourceConfig.cmake` (or packaging/make-tarball,
# which uses git archive and is what the Homebrew/Arch/Alpine recipes expect).
set(CPACK_PACKAGE_NAME rlock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_PACKAGE_FILE_NAME "rlock-${PROJECT_VERSION}")
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/" "/\\\\.cache/" "\\\\.o$")
include(CPack)
