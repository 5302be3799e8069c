// doctest's main for the frost_tests binary; the cases live in the other files.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
