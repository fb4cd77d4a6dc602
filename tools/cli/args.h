#pragma once
/// @file args.h
/// Forwards to common/args.h, where the one command-line reader (inferlab::Args) lives since the
/// chapter programs read their options with it too. Only tools/cli/decode.cpp still includes
/// this name; new code includes common/args.h.

#include "common/args.h"
