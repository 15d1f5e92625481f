# shellsim_set_warnings(target): the project's warning set, applied target by target.
function(shellsim_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                           -Wno-sign-conversion -Wnon-virtual-dtor)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # core/simd_lanes.hpp's Lanes (8 doubles) are passed and returned by inline functions
    # only; without AVX-512 GCC notes that such a return "changes the ABI", which matters
    # only across separately compiled code built with different flags (never the case here).
    target_compile_options(${target} PRIVATE -Wno-psabi)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    # GCC 12 reports a false -Wrestrict inside std::string concatenation at -O3 (GCC bug 105329).
    target_compile_options(${target} PRIVATE -Wno-restrict)
    if(SHELLSIM_HAS_MARCH_NATIVE)
      # ... and false -W(maybe-)uninitialized in its own AVX-512 intrinsics, whose
      # _mm512_undefined_pd() operands it tracks into Eigen's packet code (GCC bug 105593,
      # fixed in GCC 13). Clang and GCC 13 still check our code for both.
      target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized -Wno-uninitialized)
    endif()
  endif()
  if(SHELLSIM_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(SHELLSIM_SANITIZE AND SHELLSIM_FUZZ)
    # The fuzz build: AddressSanitizer everywhere, UndefinedBehaviorSanitizer on the code that
    # reads the fuzzers' bytes only (shellsim_sanitize_undefined); see there for why.
    target_compile_options(${target} PRIVATE -fsanitize=address -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  elseif(SHELLSIM_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(SHELLSIM_FUZZ)
    # Coverage instrumentation for libFuzzer in every target, not only the fuzz drivers.
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()

# shellsim_sanitize_undefined(DIRECTORY dir SOURCES file...): in the fuzz build, adds
# UndefinedBehaviorSanitizer to these sources of the targets defined in dir. Only the code
# that decodes the fuzzers' input gets it (readers, scene and model-parameter parsing, state
# files): on the physics kernels, which that input reaches only as decoded numbers, it
# doubled clang's compile time (discrete_shell_model.cpp 17.5 s with ASan alone at -O0,
# 25.5 s at -O1, 40-44 s with both) and made the fuzz build most of CI's time.
function(shellsim_sanitize_undefined)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "DIRECTORY" "SOURCES")
  if(SHELLSIM_SANITIZE AND SHELLSIM_FUZZ)
    set_source_files_properties(${arg_SOURCES} DIRECTORY ${arg_DIRECTORY} PROPERTIES
                                COMPILE_OPTIONS "-fsanitize=undefined;-fno-sanitize-recover=undefined")
  endif()
endfunction()
