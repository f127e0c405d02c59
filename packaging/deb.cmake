# Read by cpack when it packs (CPACK_PROJECT_CONFIG_FILE, CMakeLists.txt), once
# the library is built: the .deb depends on the oldest libc6 that has every
# glibc symbol version the library references (tools/check-symbols, which
# also refuses a library with GLIBC_PRIVATE symbols or other libraries).
if(CPACK_GENERATOR STREQUAL "DEB")
  execute_process(COMMAND ${CPACK_PINFAST_CHECK_SYMBOLS} --glibc ${CPACK_PINFAST_LIBRARY}
    OUTPUT_VARIABLE glibc ERROR_VARIABLE why RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pinfast: no .deb: ${why}")
  endif()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3 (>= 3.9), libc6 (>= ${glibc})")
endif()
