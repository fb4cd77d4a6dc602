# Text in, text out (chapter 08): `inferlab generate --prompt` / `--chat` and `inferlab chat`.

# The writer of the streamed text (tools/cli/text_stream.h: whole UTF-8 characters at every flush,
# stop ids hidden) and the engine loop that feeds it (tools/cli/streamed_reply.h: the engine's
# tokens, the prefix cache's reuse, an interrupt's abort), compiled from the CLI's sources.
inferlab_add_test(test_ch08_text_stream
                  SOURCES test_text_stream.cpp ${PROJECT_SOURCE_DIR}/tools/cli/text_stream.cpp
                          ${PROJECT_SOURCE_DIR}/tools/cli/streamed_reply.cpp
                  LABELS "ch08;cpu" LIBS inferlab::runtime)
target_compile_definitions(test_ch08_text_stream PRIVATE ${ch08_paths})

# chat's input: lines of stdin, and a SIGINT that ends the wait for one (tools/cli/interruptible_input.h).
inferlab_add_test(test_ch08_chat_input
                  SOURCES test_chat_input.cpp ${PROJECT_SOURCE_DIR}/tools/cli/interruptible_input.cpp
                  LABELS "ch08;cpu")

# The inferlab binary as a user runs it: generate --prompt's text equals the decode of --prompt-ids'
# ids, --chat's template and stop, the float64 reference's answer, chat on a pipe (turns, prefix
# reuse, /reset, /quit), SIGINT during a reply and at the prompt, errors and --help.
inferlab_add_test(test_ch08_text_cli SOURCES test_text_cli.cpp LABELS "ch08;cli;cpu")
target_compile_definitions(test_ch08_text_cli PRIVATE ${ch08_paths} INFERLAB_EXE="$<TARGET_FILE:inferlab>")
add_dependencies(test_ch08_text_cli inferlab)
