# Chapter 09's Python tests, run with build/venv's Python (tools/python-requirements.txt: the
# official `openai` client, httpx, prometheus-client) through venv_python.sh, which fails naming
# `./inferlab setup` when the venv is missing or stale; the tests themselves fail naming it when
# chapter 08's model is. Each starts `inferlab serve` on a free loopback port. About 35 s in all
# on the lab's 2-core machine.
set(ch09_python sh ${CMAKE_CURRENT_SOURCE_DIR}/venv_python.sh ${PROJECT_SOURCE_DIR}/build/venv/bin/python
                ${PROJECT_SOURCE_DIR}/tools/python-requirements.txt)
# OMP_WAIT_POLICY=passive as every test (tests/CMakeLists.txt): the server's idle OpenMP workers
# must not spin on the cores its clients need.
set(ch09_python_env INFERLAB_EXE=$<TARGET_FILE:inferlab> INFERLAB_SMOLLM2_GGUF=${INFERLAB_SMOLLM2_GGUF}
                    OMP_WAIT_POLICY=passive PYTHONDONTWRITEBYTECODE=1)

# The server through OpenAI's own Python client: streamed = non-streamed, usage, finish reasons,
# stop strings, the error objects, 32 concurrent streams each equal to its request alone.
add_test(NAME ServePython.OpenAiClient COMMAND ${ch09_python} ${CMAKE_CURRENT_SOURCE_DIR}/test_openai_client.py)
# A bounded soak (300 requests: streams, disconnects, malformed bodies), the books at the end (/health,
# /metrics, RSS, exit 0), then backpressure: 413 over --max-body-bytes, 429 with Retry-After.
add_test(NAME ServePython.Soak COMMAND ${ch09_python} ${CMAKE_CURRENT_SOURCE_DIR}/soak_serve.py)
# Careless and hostile clients (standard library, raw loopback sockets): a 10,000-deep body, 60
# slowloris connections beside /health probes, connections beyond the cap, an abandoned request,
# pipelining, max_model_len, the finish reasons of /health and /metrics, Retry-After, SIGTERM.
add_test(NAME ServePython.HostileClients COMMAND ${ch09_python} ${CMAKE_CURRENT_SOURCE_DIR}/test_hostile_clients.py)
# `./inferlab bench serve` (tools/bench_serve.py): its statistics and its ShareGPT / Alpaca sampler
# against chapter 06's C++ one (no server), then 8 requests end to end with the offline comparison.
add_test(NAME BenchServe.Statistics COMMAND ${ch09_python} ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_serve.py
                                            Statistics Sampler Workload)
add_test(NAME BenchServe.EndToEnd COMMAND ${ch09_python} ${CMAKE_CURRENT_SOURCE_DIR}/test_bench_serve.py EndToEnd)

set_tests_properties(ServePython.OpenAiClient ServePython.Soak ServePython.HostileClients BenchServe.Statistics
                     BenchServe.EndToEnd PROPERTIES LABELS "ch09;cli;cpu" TIMEOUT 180 ENVIRONMENT "${ch09_python_env}")
# A server and its clients keep both cores busy: ctest -j2 runs nothing beside them.
set_tests_properties(ServePython.OpenAiClient ServePython.Soak ServePython.HostileClients BenchServe.EndToEnd
                     PROPERTIES PROCESSORS 2)
