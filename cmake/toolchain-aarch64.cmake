# Cross build for 64-bit ARM Linux (Raspberry Pi 5 / Debian 12 arm64) with Debian's
# g++-aarch64-linux-gnu. The arm64 libraries come from Debian's multiarch packages
# (dpkg --add-architecture arm64; libfmt-dev:arm64 libspdlog-dev:arm64), installed under
# /usr/lib/aarch64-linux-gnu; header-only packages (CLI11, nlohmann-json, Catch2 v2) are shared
# with the host. scripts/test-aarch64.sh installs all of it and runs the result under qemu.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Programs (python3, ...) are the host's; libraries and packages only the arm64 ones.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# Test executables run under user-mode emulation (qemu-user); the CPU model comes from QEMU_CPU.
find_program(NEEDLE_QEMU_AARCH64 qemu-aarch64)
if(NEEDLE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NEEDLE_QEMU_AARCH64})
endif()
