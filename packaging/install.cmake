# packaging/install.cmake — what `cmake --install` lays out besides the binary, the
# library and its headers (CMakeLists.txt): the man pages abx(1) and abx.yaml(5) and the
# bash completion, written at build time by the abx just built from its command and
# config-key tables (so they cannot drift: nothing generated is committed), the systemd
# unit, the example /etc/abx/abx.yaml, and the Python client and abx_ops module where
# Debian's python3 finds them. Every destination is relative to the prefix unless set
# absolute (the Debian package sets /etc and /lib/systemd/system: docs/install.md).
set(ABX_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "where the Python client (abx/) and abx_ops.py go, relative to the prefix")
set(ABX_INSTALL_SYSTEMDUNITDIR "lib/systemd/system" CACHE STRING "where abx.service goes")
set(ABX_INSTALL_BASHCOMPLETIONDIR "${CMAKE_INSTALL_DATADIR}/bash-completion/completions" CACHE STRING
    "where the bash completion goes (as abx)")

set(ABX_GEN_PKG ${CMAKE_BINARY_DIR}/packaging)
# ASan builds run the generator too: the registry's singletons live until exit
add_custom_command(
  OUTPUT ${ABX_GEN_PKG}/abx.1 ${ABX_GEN_PKG}/abx.yaml.5 ${ABX_GEN_PKG}/abx.bash
  COMMAND ${CMAKE_COMMAND} -E make_directory ${ABX_GEN_PKG}
  COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
          sh -c "\"$0\" manpage abx > \"$1/abx.1\" && \"$0\" manpage abx.yaml > \"$1/abx.yaml.5\" && \"$0\" completion bash > \"$1/abx.bash\""
          $<TARGET_FILE:abx> ${ABX_GEN_PKG}
  DEPENDS abx
  COMMENT "abx(1), abx.yaml(5) and the bash completion from the command and config-key tables"
  VERBATIM)
add_custom_target(abx_manpages ALL DEPENDS ${ABX_GEN_PKG}/abx.1 ${ABX_GEN_PKG}/abx.yaml.5 ${ABX_GEN_PKG}/abx.bash)
configure_file(${CMAKE_SOURCE_DIR}/packaging/abx.service.in ${ABX_GEN_PKG}/abx.service @ONLY)

install(FILES ${ABX_GEN_PKG}/abx.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${ABX_GEN_PKG}/abx.yaml.5 DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
install(FILES ${ABX_GEN_PKG}/abx.bash DESTINATION ${ABX_INSTALL_BASHCOMPLETIONDIR} RENAME abx)
install(FILES ${ABX_GEN_PKG}/abx.service DESTINATION ${ABX_INSTALL_SYSTEMDUNITDIR})
install(FILES ${CMAKE_SOURCE_DIR}/packaging/abx.yaml DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/abx)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/clients/python/abx DESTINATION ${ABX_INSTALL_PYTHONDIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/python/abx_ops.py DESTINATION ${ABX_INSTALL_PYTHONDIR})
