/// @file
/// The test programs' precompiled header (tests/CMakeLists.txt, INFERLAB_TEST_PCH): GoogleTest,
/// GoogleMock and the standard headers most test files include, parsed once per build instead of
/// once per test file. Only headers whose meaning no test-specific macro changes belong here (a
/// test's INFERLAB_TEST_BACKEND_* must not reach it): the lab's own headers stay in the tests.
/// Each test file still includes what it uses, so it compiles without this header too.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
