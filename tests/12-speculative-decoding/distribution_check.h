#pragma once
// The distribution test of speculative sampling (chapter 12): a rejection sampler under test —
// the engine's verify_rejection() (test_speculative.cpp), a student's (test_student.cpp, in the
// sandbox) or a deliberately wrong one (tests/wrong/wrong_ch12_exercises.cpp) — is run on small
// random targets many times, each step's guesses drawn from the drafter's q, and what comes out
// must follow the target's distributions exactly (Leviathan et al., ICML 2023, Theorem 1).
//
// What is tested, and why it is rigorous. A case fixes γ + 1 target rows p[0 … γ] and γ drafter
// rows q[0 … γ − 1] (an empty q row: a deterministic guess, the fixed token `fixed_guess[i]`); the
// rows do not depend on the tokens before them (a valid special case of a model: the theorem holds
// for any conditional distributions, so in particular for constant ones). Each trial draws its
// guesses d_{i+1} ~ q[i] independently and hands them, with a fresh rng_state, to the sampler.
//   1. Position k (k = 0 … γ): among the trials that emit a (k + 1)-th token — those whose first k
//      guesses were accepted — that token must follow p[k]. (Given that the first k guesses were
//      accepted, guess k + 1 is still an independent draw from q[k] and the sampler's draws at
//      position k are fresh, so Theorem 1 applies to position k as it does to position 0.)
//      Checked by Pearson's chi-square goodness-of-fit over the tokens with p[k][t] > 0 (a token
//      with p[k][t] = 0 must never come out: that alone fails), degrees of freedom = those tokens
//      − 1, rejected when the p-value Q((cells − 1)/2, X²/2) (the regularized upper incomplete
//      gamma function, below) is under kSignificance = 1e-6. (With 30 000 steps every expected
//      count is above 50: the chi-square approximation holds.)
//   2. Guess k + 1 must be accepted, among the trials that reach it, at the rate
//      β_k = Σ_t min(p[k][t], q[k][t]) (= p[k][d] for a deterministic guess d): accepting with
//      probability min(1, p/q) gives exactly that. A two-sided binomial test by the normal
//      approximation (with 30 000 steps, at least 8 000 reach each guess in the cases below, and
//      β_k·n_k and (1 − β_k)·n_k are above 1 000), rejected when erfc(|z|/√2) < kSignificance, i.e.
//      |z| > 4.89. A sampler that emits the right tokens but accepts less often (one that accepts
//      only when the guess equals a token drawn from p: rate Σ p·q) is slower than the contract,
//      and this test catches it.
//   3. The structure: 1 … γ + 1 tokens, accepted = tokens − 1, and the accepted tokens are the
//      guesses.
// With about 20 tests per case and 4 cases, an honest sampler fails with probability below 1e-4;
// the wrong samplers of tests/wrong/wrong_ch12_exercises.cpp fail the first case alone with
// p-values below 1e-20 (chi-square 130–3 000 on 5 degrees of freedom, where 1e-6 is 35.9; an
// acceptance z of −60), and the other cases add to that (the fixtures print their statistics).
//
// The cases are fixed (seeds 1201 … 1204, so the power against the known wrong samplers is fixed
// too); the guesses and the rng states of each run are fresh, from the caller's Rng (its seed is
// printed on failure).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/rng.h"
#include "tests/support/student_answers.h"

namespace inferlab::testing::ch12 {

// A batch's answers, and why they stop early: tests/support/student_answers.h.
using testing::Answers;
using testing::missing_answer;

/// The significance of each test of the distribution check: an honest sampler fails one with
/// this probability.
inline constexpr double kSignificance = 1e-6;

/// The regularized upper incomplete gamma function Q(a, x) = Γ(a, x) / Γ(a), a > 0, x ≥ 0: the
/// series of P(a, x) for x < a + 1 (Q = 1 − P, not small there), else the continued fraction of
/// Q by the modified Lentz method, which keeps its relative accuracy where Q is tiny (Numerical
/// Recipes §6.2's method; both to about 1e-14 relative).
inline double upper_gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefactor = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
    }
    return std::max(0.0, 1.0 - sum * std::exp(log_prefactor));
  }
  constexpr double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -double(i) * (double(i) - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefactor) * h;
}

/// The p-value of a chi-square statistic @p statistic with @p degrees_of_freedom: P(X² ≥ statistic).
inline double chi_square_p_value(double statistic, int64_t degrees_of_freedom) {
  return upper_gamma_q(0.5 * double(degrees_of_freedom), 0.5 * statistic);
}

/// One small target: p (γ + 1 rows), q (γ rows; empty = a deterministic guess) and, for each empty
/// q row, the guess it makes (−1 for a full row: the guess is drawn from q).
struct DistributionCase {
  std::string name;
  std::vector<std::vector<double>> p, q;
  std::vector<int32_t> fixed_guess;
  int64_t gamma() const { return int64_t(q.size()); }
};

/// The trials of one case, drawn before the sampler runs: @ref count steps, γ guesses each (row
/// major) and an rng_state each.
struct DistributionTrials {
  int64_t count = 0;
  std::vector<int32_t> drafts;
  std::vector<uint64_t> states;
};

/// One case and its trials: what a sampler under test runs.
struct DistributionJob {
  const DistributionCase* target = nullptr;
  DistributionTrials trials;
};

/// A sampler under test on a batch of jobs: per job, one flat answer — for each trial
/// [accepted, number of tokens, tokens …].
using DistributionRunFn = std::function<Answers<std::vector<int32_t>>(std::span<const DistributionJob>)>;

/// A probability row: softmax of normals × @p spread, with @p zeros of its smallest entries set
/// to 0 (a nucleus cut) and the rest renormalised.
inline std::vector<double> random_row(Rng& rng, int64_t vocab, double spread, int64_t zeros = 0) {
  std::vector<double> row(static_cast<size_t>(vocab));
  double total = 0.0;
  for (double& x : row) total += x = std::exp(spread * double(rng.normal()));
  for (double& x : row) x /= total;
  if (zeros > 0) {
    std::vector<double> sorted = row;
    std::sort(sorted.begin(), sorted.end());
    const double cut = sorted[size_t(zeros - 1)];
    total = 0.0;
    for (double& x : row) total += x = x <= cut ? 0.0 : x;
    for (double& x : row) x /= total;
  }
  return row;
}

/// The four fixed cases (seeds 1201 … 1204): γ = 1 with full q rows; γ = 3 with targets that give
/// some tokens probability 0 (q still proposes them: those guesses are always rejected); γ = 2
/// with deterministic guesses (a likely and an unlikely one); γ = 2 with a full and an empty q row.
inline std::vector<DistributionCase> distribution_cases() {
  std::vector<DistributionCase> cases;
  {
    Rng rng(1201);
    DistributionCase c{"vocab 6, γ = 1, q drawn", {}, {}, {-1}};
    for (int i = 0; i < 2; ++i) c.p.push_back(random_row(rng, 6, 1.0));
    c.q.push_back(random_row(rng, 6, 1.0));
    cases.push_back(std::move(c));
  }
  {
    Rng rng(1202);
    DistributionCase c{"vocab 8, γ = 3, targets with zeros, q drawn", {}, {}, {-1, -1, -1}};
    for (int i = 0; i < 4; ++i) c.p.push_back(random_row(rng, 8, 0.8, i == 3 ? 0 : 2));
    for (int i = 0; i < 3; ++i) c.q.push_back(random_row(rng, 8, 0.8));
    cases.push_back(std::move(c));
  }
  {
    Rng rng(1203);
    DistributionCase c{"vocab 7, γ = 2, deterministic guesses", {}, {{}, {}}, {}};
    for (int i = 0; i < 3; ++i) c.p.push_back(random_row(rng, 7, 0.7));
    // Guess 1: the target's most likely token; guess 2: its third most likely.
    for (int i = 0; i < 2; ++i) {
      std::vector<int32_t> order(7);
      for (int32_t t = 0; t < 7; ++t) order[size_t(t)] = t;
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return c.p[size_t(i)][size_t(a)] > c.p[size_t(i)][size_t(b)]; });
      c.fixed_guess.push_back(order[i == 0 ? 0 : 2]);
    }
    cases.push_back(std::move(c));
  }
  {
    Rng rng(1204);
    DistributionCase c{"vocab 6, γ = 2, a drawn and a deterministic guess", {}, {}, {-1, 4}};
    for (int i = 0; i < 3; ++i) c.p.push_back(random_row(rng, 6, 1.2));
    c.q.push_back(random_row(rng, 6, 1.2));
    c.q.push_back({});
    cases.push_back(std::move(c));
  }
  return cases;
}

/// @p count trials of @p target: guesses drawn from q (inverse CDF of a uniform from @p rng) or
/// fixed, an rng_state each.
inline DistributionTrials draw_trials(const DistributionCase& target, Rng& rng, int64_t count) {
  DistributionTrials trials;
  trials.count = count;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int64_t n = 0; n < count; ++n) {
    for (int64_t i = 0; i < target.gamma(); ++i) {
      const std::vector<double>& q = target.q[size_t(i)];
      if (q.empty()) {
        trials.drafts.push_back(target.fixed_guess[size_t(i)]);
        continue;
      }
      const double u = uniform(rng.engine());
      double cumulative = 0.0;
      int32_t guess = -1;
      for (size_t t = 0; t < q.size(); ++t) {
        if (q[t] <= 0.0) continue;
        guess = int32_t(t);
        cumulative += q[t];
        if (cumulative > u) break;
      }
      trials.drafts.push_back(guess);
    }
    trials.states.push_back(rng.engine()());
  }
  return trials;
}

/// The acceptance rate of guess @p i of @p target: Σ min(p, q), or p(d) for a deterministic guess.
inline double acceptance_rate(const DistributionCase& target, int64_t i) {
  const std::vector<double>& p = target.p[size_t(i)];
  const std::vector<double>& q = target.q[size_t(i)];
  if (q.empty()) return p[size_t(target.fixed_guess[size_t(i)])];
  double rate = 0.0;
  for (size_t t = 0; t < p.size(); ++t) rate += std::min(p[t], q[t]);
  return rate;
}

/// What the distribution check found, per case: for the wrong fixtures' messages.
inline std::string p_value_text(double p_value) {
  std::ostringstream s;
  s.precision(3);
  s << p_value;
  return s.str();
}

/// The check: every job's trials through @p run, then, per case, the structure, the tokens at each
/// position against p[k] (chi-square) and each guess's acceptance rate against Σ min(p, q)
/// (binomial), each at kSignificance. @p trials_per_case: 20 000 … 50 000 gives the wrong samplers
/// of tests/wrong/ p-values far below 1e-6. @p what names the sampler in messages.
inline ::testing::AssertionResult distribution_matches(const DistributionRunFn& run, Rng& rng, int64_t trials_per_case,
                                                       const std::string& what) {
  const std::vector<DistributionCase> cases = distribution_cases();
  std::vector<DistributionJob> jobs;
  for (const DistributionCase& c : cases) jobs.push_back({&c, draw_trials(c, rng, trials_per_case)});
  const Answers<std::vector<int32_t>> got = run(jobs);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const DistributionCase& c = cases[j];
    const DistributionTrials& trials = jobs[j].trials;
    const int64_t gamma = c.gamma(), vocab = int64_t(c.p[0].size());
    const std::string where = what + " on the case \"" + c.name + "\" (" + std::to_string(trials.count) + " steps)";
    if (const std::string missing = missing_answer(got, j); !missing.empty())
      return ::testing::AssertionFailure() << where << "\n  no answer: " << missing;
    const std::vector<int32_t>& flat = got.answers[j];
    // counts[k][t]: trials whose (k + 1)-th token is t; reached[k]: trials that reached guess k.
    std::vector<std::vector<int64_t>> counts(size_t(gamma + 1), std::vector<int64_t>(size_t(vocab), 0));
    std::vector<int64_t> reached(size_t(gamma + 1), 0);
    size_t at = 0;
    for (int64_t n = 0; n < trials.count; ++n) {
      if (at + 2 > flat.size())
        return ::testing::AssertionFailure() << where << ": the answer stops at step " << n << " (garbled)";
      const int64_t accepted = flat[at], size = flat[at + 1];
      at += 2;
      if (size < 1 || size > gamma + 1 || accepted != size - 1 || at + size_t(size) > flat.size())
        return ::testing::AssertionFailure() << where << ": step " << n << " returned " << size << " tokens with accepted "
                                             << accepted << " (want 1 … γ + 1 = " << gamma + 1
                                             << " tokens and accepted = tokens − 1)";
      for (int64_t k = 0; k < size; ++k) {
        const int32_t token = flat[at + size_t(k)];
        if (token < 0 || token >= vocab)
          return ::testing::AssertionFailure() << where << ": step " << n << " emitted token " << token
                                               << ", outside the vocabulary of " << vocab;
        if (k < accepted && token != trials.drafts[size_t(n * gamma + k)])
          return ::testing::AssertionFailure() << where << ": step " << n << " accepted token " << token << " at position "
                                               << k << ", but the guess there was " << trials.drafts[size_t(n * gamma + k)]
                                               << " (an accepted token is the guess itself)";
        ++counts[size_t(k)][size_t(token)];
      }
      for (int64_t k = 0; k <= accepted && k <= gamma; ++k) ++reached[size_t(k)];
      at += size_t(size);
    }
    // 1. each position against p[k].
    for (int64_t k = 0; k <= gamma; ++k) {
      const std::vector<double>& p = c.p[size_t(k)];
      const std::vector<int64_t>& count = counts[size_t(k)];
      int64_t total = 0;
      for (const int64_t x : count) total += x;
      if (total == 0) continue;  // no step got there
      double statistic = 0.0;
      int64_t cells = 0;
      std::ostringstream table;
      table.precision(4);
      for (int64_t t = 0; t < vocab; ++t) {
        const double expected = p[size_t(t)] * double(total);
        table << "\n      token " << t << ": expected " << expected << " (p = " << p[size_t(t)] << "), observed "
              << count[size_t(t)];
        if (p[size_t(t)] == 0.0) {
          if (count[size_t(t)] > 0)
            return ::testing::AssertionFailure()
                   << where << ": token " << t << " came out " << count[size_t(t)] << " times at position " << k
                   << ", where the target gives it probability 0 (a rejected guess is replaced from max(0, p − q): "
                      "never a token p excludes)"
                   << table.str();
          continue;
        }
        ++cells;
        const double diff = double(count[size_t(t)]) - expected;
        statistic += diff * diff / expected;
      }
      if (cells < 2) continue;
      const double p_value = chi_square_p_value(statistic, cells - 1);
      if (p_value < kSignificance)
        return ::testing::AssertionFailure()
               << where << ": the token at position " << k << " (among the " << total
               << " steps that emit one) does not follow the target's p[" << k << "]: chi-square " << p_value_text(statistic)
               << " with " << cells - 1 << " degrees of freedom, p-value " << p_value_text(p_value) << " < 1e-6"
               << table.str()
               << "\n  The replacement of a rejected guess must come from normalize(max(0, p − q)), and a guess be "
                  "accepted with probability min(1, p/q): then P(token) = min(p, q) + P(reject)·residual = p "
                  "(Leviathan et al., Theorem 1).";
    }
    // 2. each guess's acceptance rate.
    for (int64_t k = 0; k < gamma; ++k) {
      const int64_t n = reached[size_t(k)], accepted = reached[size_t(k + 1)];
      const double beta = acceptance_rate(c, k);
      const double mean = beta * double(n), variance = double(n) * beta * (1.0 - beta);
      std::ostringstream message;
      message << where << ": guess " << k + 1 << " was accepted in " << accepted << " of the " << n
              << " steps that reached it (" << double(accepted) / double(std::max<int64_t>(n, 1))
              << "); the contract's rate is " << beta
              << (c.q[size_t(k)].empty() ? " = p(d) for a deterministic guess d" : " = Σ min(p, q)");
      if (variance <= 0.0) {
        if (double(accepted) != mean)
          return ::testing::AssertionFailure() << message.str() << ", exactly (min(1, p/q) is 0 or 1 here)";
        continue;
      }
      const double z = (double(accepted) - mean) / std::sqrt(variance);
      const double p_value = std::erfc(std::fabs(z) / std::sqrt(2.0));
      if (p_value < kSignificance)
        return ::testing::AssertionFailure()
               << message.str() << ": z = " << p_value_text(z) << ", p-value " << p_value_text(p_value) << " < 1e-6"
               << "\n  Accept guess d when u · q(d) < p(d), u uniform in [0, 1): probability min(1, p(d)/q(d)).";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing::ch12
