# dsdoctor_library(NAME SOURCES ... DEPS ...): the library target dsdoctor_<NAME> (alias dsdoctor::<NAME>).
function(dsdoctor_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(dsdoctor_${name} STATIC ${ARG_SOURCES})
  add_library(dsdoctor::${name} ALIAS dsdoctor_${name})
  target_include_directories(dsdoctor_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(dsdoctor_${name} PUBLIC ${ARG_DEPS})
endfunction()

# dsdoctor_test(NAME SOURCES ... DEPS ... [LABELS ...] [DISCOVERY_FILTER expr]): a GoogleTest binary
# registered with CTest, a CTest test per GoogleTest test (those DISCOVERY_FILTER, a --gtest_filter, selects).
function(dsdoctor_test name)
  if(NOT DSDOCTOR_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT;DISCOVERY_FILTER" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  include(GoogleTest)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(NOT ARG_DISCOVERY_FILTER)
    set(ARG_DISCOVERY_FILTER "*")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 30 TEST_FILTER "${ARG_DISCOVERY_FILTER}"
                       PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
endfunction()
