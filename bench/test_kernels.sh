#!/usr/bin/env bash
# The kernels RuntimeGPUTest runs (on a GPU, or on fdemu in `make test`):
# GQA with lse (f16, bf16), HND, speculative decoding, paged (dense pages
# and HND with Lq = 8), uneven row tiles (MQA; D=96 with Lq = 4; GQA-6 with
# Lq = 3 on tensor cores), merges of 100 and 300 splits, and MHA on CUDA
# cores (dense and paged). f16/bf16
# kernels at D = 64 and 128 with more than one row per KV head (grouped
# heads, or Lq > 1) run on tensor cores, the others on CUDA cores
# (docs/KernelABI.md). Then sliding windows and logit soft-capping
# (RuntimeGPUFeaturesTest) on both forms, and attention sinks
# (RuntimeGPUPerHeadTest), ALiBi (RuntimeGPUPerHeadTest) and per-sequence query
# lengths (RuntimeGPUQueryLensTest), and fp8 caches (RuntimeGPUFloat8Test);
# last, twins of some of them with the fused merge (fused_*).
# Usage: bench/test_kernels.sh DIR [fd-compile] [TARGET] (default sm_90).
set -euo pipefail
dir=${1:?usage: bench/test_kernels.sh DIR [fd-compile] [TARGET]}
compile=${2:-build/bin/fd-compile}
arch=${3:-sm_90}
common="--no-cache --arch $arch --head-dim 128 --num-q-heads 8 --num-kv-heads 2"
"$compile" $common --dtype f16 --num-splits 5 --with-lse -o "$dir/gqa_f16" >/dev/null
"$compile" $common --dtype bf16 --num-splits 5 --with-lse -o "$dir/gqa_bf16" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --kv-layout HND --with-lse -o "$dir/gqa_hnd" >/dev/null
"$compile" $common --dtype f16 --num-splits 4 --query-len 4 --with-lse -o "$dir/spec4" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --page-size 16 --with-lse -o "$dir/paged16" >/dev/null
"$compile" $common --dtype bf16 --num-splits 6 --page-size 64 --kv-layout HND --query-len 8 --with-lse -o "$dir/paged_spec" >/dev/null
# Uneven row tiles: MQA's 32 rows as 5 tiles of 7 (the last holds 4), and
# D=96 GQA-8 with Lq = 4 (32 rows per KV head).
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 32 \
  --num-kv-heads 1 --dtype f16 --num-splits 7 --with-lse -o "$dir/mqa_tiles" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 96 --num-q-heads 32 \
  --num-kv-heads 4 --dtype bf16 --num-splits 3 --query-len 4 --with-lse \
  -o "$dir/gqa8_d96_spec4" >/dev/null
# Merges of many splits (MergeKernel.cpp loads up to 128 partials per
# iteration): MQA with 100 (one iteration, MQA's plan at B=1 L=32k is 94),
# GQA with 300 (an iteration, a loop step and 44 left; most chunks hold 2
# or 3 keys, many none).
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 32 \
  --num-kv-heads 1 --dtype f16 --num-splits 100 --with-lse \
  -o "$dir/mqa_s100" >/dev/null
"$compile" $common --dtype bf16 --num-splits 300 --with-lse \
  -o "$dir/gqa_bf16_s300" >/dev/null
# Tensor cores: 18 rows (group 6 x Lq 3) as two tiles of 9, a query token's
# rows across the tile boundary, D = 64.
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 12 \
  --num-kv-heads 2 --dtype f16 --num-splits 4 --query-len 3 --with-lse \
  -o "$dir/gqa6_d64_spec3" >/dev/null
# CUDA cores: MHA, dense and paged.
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 4 \
  --num-kv-heads 4 --dtype f16 --num-splits 5 --with-lse \
  -o "$dir/mha_f16" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 4 \
  --num-kv-heads 4 --dtype bf16 --num-splits 3 --page-size 16 --with-lse \
  -o "$dir/mha_paged16" >/dev/null
# Schedules written by hand (--schedule; docs/KernelABI.md, "Schedules"),
# not the planner's: MQA D=64 (16 rows) as two tiles of 8 with three K/V
# stages, 2 of q's k-steps held, 3 blocks per SM (planned: one tile, two
# stages, all four held, 4 blocks); paged GQA-8 D=64 with Lq = 2 (16 rows)
# as tiles of 6, 6 and 4 with four stages; GQA-4 bf16 D=128 on CUDA cores
# in tiles of one row (planned: tensor cores).
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 16 \
  --num-kv-heads 1 --dtype f16 --num-splits 5 --with-lse \
  --schedule "form = tensor_cores, rows_per_tile = 8, row_tiles = 2, threads = 128, min_blocks_per_sm = 3, held_query_steps = 2, stages = 3" \
  -o "$dir/hand_mqa_d64_stages3" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 16 \
  --num-kv-heads 2 --dtype bf16 --num-splits 3 --query-len 2 --page-size 16 \
  --with-lse \
  --schedule "form = tensor_cores, rows_per_tile = 6, row_tiles = 3, threads = 128, min_blocks_per_sm = 2, held_query_steps = 1, stages = 4" \
  -o "$dir/hand_paged_gqa8_d64_stages4" >/dev/null
"$compile" $common --dtype bf16 --num-splits 4 --with-lse \
  --schedule "form = cuda_cores, rows_per_tile = 1, row_tiles = 4, threads = 128" \
  -o "$dir/hand_gqa4_cuda_cores" >/dev/null
# Sliding window (--window-left) and logit soft-capping (--logits-soft-cap),
# RuntimeGPUFeaturesTest's. Tensor cores: GQA f16 D=128 with W = 100 (Lq =
# 1 and 4) and W = 3 < Lq = 4; MQA bf16 with W = 50; GQA D=64 soft-capped;
# paged 16 with W = 21 and a cap. CUDA cores: f32 HND with W = 37 and
# Lq = 3; MHA bf16 soft-capped; MHA f16 with W = 1 and a cap.
"$compile" $common --dtype f16 --num-splits 5 --window-left 100 --with-lse \
  -o "$dir/win100_tc" >/dev/null
"$compile" $common --dtype f16 --num-splits 4 --query-len 4 --window-left 3 \
  --with-lse -o "$dir/win3_tc_spec4" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --query-len 4 --window-left 100 \
  --with-lse -o "$dir/win100_tc_spec4" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 32 \
  --num-kv-heads 1 --dtype bf16 --num-splits 7 --window-left 50 --with-lse \
  -o "$dir/win50_mqa_bf16" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 12 \
  --num-kv-heads 2 --dtype f16 --num-splits 4 --query-len 2 \
  --logits-soft-cap 30 --with-lse -o "$dir/cap30_tc_d64" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --query-len 2 --page-size 16 \
  --window-left 21 --logits-soft-cap 20 --with-lse \
  -o "$dir/paged16_win21_cap20_tc" >/dev/null
"$compile" $common --dtype f32 --num-splits 5 --query-len 3 --kv-layout HND \
  --window-left 37 --with-lse -o "$dir/win37_f32_hnd_spec3" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 4 \
  --num-kv-heads 4 --dtype bf16 --num-splits 5 --logits-soft-cap 5 \
  --with-lse -o "$dir/cap5_mha_bf16" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 4 \
  --num-kv-heads 4 --dtype f16 --num-splits 16 --window-left 1 \
  --logits-soft-cap 50 --with-lse -o "$dir/win1_cap50_mha" >/dev/null
# Attention sinks (--with-sinks), RuntimeGPUPerHeadTest's. Tensor cores: GQA
# f16 D=128; MQA bf16 with W = 50; paged 16; Lq = 4 with W = 3 (< Lq). CUDA
# cores: GQA f32 with 6 splits (more than short sequences have tokens).
"$compile" $common --dtype f16 --num-splits 5 --with-sinks --with-lse \
  -o "$dir/sinks_tc" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 32 \
  --num-kv-heads 1 --dtype bf16 --num-splits 7 --window-left 50 --with-sinks \
  --with-lse -o "$dir/sinks_win50_mqa_bf16" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --page-size 16 --with-sinks \
  --with-lse -o "$dir/sinks_paged16" >/dev/null
"$compile" $common --dtype f16 --num-splits 4 --query-len 4 --window-left 3 \
  --with-sinks --with-lse -o "$dir/sinks_win3_spec4" >/dev/null
"$compile" $common --dtype f32 --num-splits 6 --with-sinks --with-lse \
  -o "$dir/sinks_f32" >/dev/null
# ALiBi (--with-alibi), RuntimeGPUPerHeadTest's. Tensor cores: GQA f16 D=128;
# bf16 Lq = 4 with W = 100; paged 16 with sinks. CUDA cores: GQA f32 with
# Lq = 3; MHA bf16 D=64 over 16 heads (BLOOM's shape, Lq = 1).
"$compile" $common --dtype f16 --num-splits 5 --with-alibi --with-lse \
  -o "$dir/alibi_tc" >/dev/null
"$compile" $common --dtype bf16 --num-splits 4 --query-len 4 --window-left 100 \
  --with-alibi --with-lse -o "$dir/alibi_win100_bf16_spec4" >/dev/null
"$compile" $common --dtype f32 --num-splits 6 --query-len 3 --with-alibi \
  --with-lse -o "$dir/alibi_f32_spec3" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 16 \
  --num-kv-heads 16 --dtype bf16 --num-splits 5 --with-alibi --with-lse \
  -o "$dir/alibi_mha_bf16_d64" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --page-size 16 --with-alibi \
  --with-sinks --with-lse -o "$dir/alibi_sinks_paged16" >/dev/null
# Per-sequence query lengths (--with-query-lens), RuntimeGPUQueryLensTest's.
# Tensor cores: GQA f16 D=128 with Lq = 4 (one row tile of 16) and bf16 with
# Lq = 8 (two tiles: n <= 4 skips the second); GQA-6 D=64 with Lq = 3 (two
# tiles of 9, a query token's rows across the boundary); paged 16 with
# Lq = 8; W = 3 (< Lq), soft-cap, sinks and ALiBi. CUDA cores: MHA bf16
# D=96 with Lq = 3; MQA f32 D=64 with Lq = 2 (32 rows as 3 tiles of 11, a
# token's rows across the boundary); MHA f32 paged 16 HND with Lq = 4; f32
# HND with W = 37, soft-cap, sinks and ALiBi.
"$compile" $common --dtype f16 --num-splits 5 --query-len 4 --with-query-lens \
  --with-lse -o "$dir/qlens_spec4" >/dev/null
"$compile" $common --dtype bf16 --num-splits 4 --query-len 8 \
  --with-query-lens --with-lse -o "$dir/qlens_bf16_spec8" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 12 \
  --num-kv-heads 2 --dtype f16 --num-splits 4 --query-len 3 \
  --with-query-lens --with-lse -o "$dir/qlens_gqa6_d64_spec3" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --query-len 8 --page-size 16 \
  --with-query-lens --with-lse -o "$dir/qlens_paged16_spec8" >/dev/null
"$compile" $common --dtype f16 --num-splits 4 --query-len 4 --window-left 3 \
  --logits-soft-cap 30 --with-sinks --with-alibi --with-query-lens \
  --with-lse -o "$dir/qlens_win3_cap30_sinks_alibi_spec4" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 96 --num-q-heads 4 \
  --num-kv-heads 4 --dtype bf16 --num-splits 5 --query-len 3 \
  --with-query-lens --with-lse -o "$dir/qlens_mha_d96_spec3" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 16 \
  --num-kv-heads 1 --dtype f32 --num-splits 7 --query-len 2 \
  --with-query-lens --with-lse -o "$dir/qlens_mqa_f32_spec2" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 4 \
  --num-kv-heads 4 --dtype f32 --num-splits 3 --query-len 4 --page-size 16 \
  --kv-layout HND --with-query-lens --with-lse \
  -o "$dir/qlens_mha_f32_paged16_hnd" >/dev/null
"$compile" $common --dtype f32 --num-splits 5 --query-len 3 --kv-layout HND \
  --window-left 37 --logits-soft-cap 20 --with-sinks --with-alibi \
  --with-query-lens --with-lse -o "$dir/qlens_win37_cap20_sinks_alibi_f32" \
  >/dev/null
# FP8 caches (--kv-dtype, --kv-scale), RuntimeGPUFloat8Test's: both formats,
# scales per tensor and per token and KV head, both decoders (cvt on the
# target sm_90, bit operations on sm_80) and both kernel forms. Tensor
# cores: GQA f16 D=128 E4M3 per tensor (33 splits: two iterations of the
# merge, the second partial) and E5M2 per token; GQA bf16 D=64 E5M2 per
# token, paged 16 HND, Lq = 4; GQA f16 E4M3 per token on sm_80; GQA bf16
# (fp8 decoded to bf16 by integer operations) E4M3 per tensor, E4M3 per
# token on sm_80 (no fp8 conversions) and E5M2 per token; MQA f16
# E4M3 per token (two row tiles); MHA f16 D=128 E4M3 per token (64
# splits): one row a head, which tensor cores take over an fp8 cache they
# multiply in f16 on sm_90. CUDA cores: MHA bf16 D=128 E4M3 per token (bf16
# queries over per-token scales keep bf16 pairs); MHA bf16 D=96 E5M2 per
# tensor, paged 16, on sm_80; f32 D=40 (8-byte vectors, idle lanes) E4M3
# per tensor, Lq = 3, on sm_80. Pages of 256 (tensor cores, E4M3 per token,
# Lq = 8) and of 1 (MHA f16, one-row tensor-core tiles, E5M2 per token,
# HND). Every model feature (window, soft-cap, sinks, ALiBi, query lengths)
# on both forms.
"$compile" $common --dtype f16 --num-splits 33 --kv-dtype e4m3 --with-lse \
  -o "$dir/fp8_e4m3_tc" >/dev/null
"$compile" $common --dtype f16 --num-splits 5 --kv-dtype e5m2 \
  --kv-scale token-head --with-lse -o "$dir/fp8_e5m2_tc_token" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 8 \
  --num-kv-heads 2 --dtype bf16 --num-splits 3 --page-size 16 --kv-layout HND \
  --query-len 4 --kv-dtype e5m2 --kv-scale token-head --with-lse \
  -o "$dir/fp8_e5m2_tc_bf16_paged16_hnd_spec4" >/dev/null
"$compile" --no-cache --arch sm_80 --head-dim 128 --num-q-heads 8 \
  --num-kv-heads 2 --dtype f16 --num-splits 4 --kv-dtype e4m3 \
  --kv-scale token-head --with-lse -o "$dir/fp8_e4m3_tc_token_sm80" >/dev/null
"$compile" $common --dtype bf16 --num-splits 6 --kv-dtype e4m3 --with-lse \
  -o "$dir/fp8_e4m3_tc_bf16" >/dev/null
"$compile" --no-cache --arch sm_80 --head-dim 128 --num-q-heads 8 \
  --num-kv-heads 2 --dtype bf16 --num-splits 4 --kv-dtype e4m3 \
  --kv-scale token-head --with-lse -o "$dir/fp8_e4m3_tc_bf16_token_sm80" >/dev/null
"$compile" $common --dtype bf16 --num-splits 5 --kv-dtype e5m2 \
  --kv-scale token-head --with-lse -o "$dir/fp8_e5m2_tc_bf16_token" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 32 \
  --num-kv-heads 1 --dtype f16 --num-splits 7 --kv-dtype e4m3 \
  --kv-scale token-head --with-lse -o "$dir/fp8_e4m3_mqa_token" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 4 \
  --num-kv-heads 4 --dtype f16 --num-splits 64 --kv-dtype e4m3 \
  --kv-scale token-head --with-lse -o "$dir/fp8_e4m3_mha_token" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 128 --num-q-heads 4 \
  --num-kv-heads 4 --dtype bf16 --num-splits 64 --kv-dtype e4m3 \
  --kv-scale token-head --with-lse -o "$dir/fp8_e4m3_mha_bf16_token" >/dev/null
"$compile" --no-cache --arch sm_80 --head-dim 96 --num-q-heads 4 \
  --num-kv-heads 4 --dtype bf16 --num-splits 3 --page-size 16 \
  --kv-dtype e5m2 --with-lse -o "$dir/fp8_e5m2_mha_bf16_paged16_sm80" >/dev/null
"$compile" --no-cache --arch sm_80 --head-dim 40 --num-q-heads 8 \
  --num-kv-heads 1 --dtype f32 --num-splits 6 --query-len 3 --kv-dtype e4m3 \
  --with-lse -o "$dir/fp8_e4m3_f32_d40_spec3_sm80" >/dev/null
"$compile" $common --dtype f16 --num-splits 4 --query-len 4 --window-left 3 \
  --logits-soft-cap 30 --with-sinks --with-alibi --with-query-lens \
  --kv-dtype e4m3 --kv-scale token-head --with-lse \
  -o "$dir/fp8_e4m3_tc_every_feature" >/dev/null
"$compile" $common --dtype f32 --num-splits 5 --query-len 3 --kv-layout HND \
  --window-left 37 --logits-soft-cap 20 --with-sinks --with-alibi \
  --with-query-lens --kv-dtype e5m2 --kv-scale token-head --with-lse \
  -o "$dir/fp8_e5m2_f32_hnd_every_feature" >/dev/null
"$compile" $common --dtype f16 --num-splits 3 --page-size 256 --query-len 8 \
  --kv-dtype e4m3 --kv-scale token-head --with-lse \
  -o "$dir/fp8_e4m3_tc_paged256_spec8" >/dev/null
"$compile" --no-cache --arch "$arch" --head-dim 64 --num-q-heads 4 \
  --num-kv-heads 4 --dtype f16 --num-splits 5 --page-size 1 --kv-layout HND \
  --kv-dtype e5m2 --kv-scale token-head --with-lse \
  -o "$dir/fp8_e5m2_mha_paged1_hnd" >/dev/null
# The fused merge (--fused-merge: the partial kernel's last block per
# sequence and KV head merges; RuntimeGPUTest, RuntimeGPUPerHeadTest,
# RuntimeGPUQueryLensTest and RuntimeGPUFloat8Test run them as they run
# their twins). Tensor cores: GQA f16 with lse; MQA's two row tiles (32 rows,
# 7 splits); paged HND bf16 with Lq = 8; sinks, window, soft-cap, ALiBi and
# query lengths at Lq = 4; fp8 e4m3 with every feature. CUDA cores: MHA (one
# row, 16 splits: more than short sequences have tokens), D = 96 GQA-8
# with Lq = 4 (32 rows, 24 slices each), f32 sinks over 6 splits, MQA f32
# D = 64 with query lengths, and MQA f32 D = 64 with Lq = 2 over 48 splits,
# whose weights (64 rows x 48) outgrow the accumulators: a buffer of their
# own. GQA bf16 over 37 splits: two lses per lane, two whole iterations of
# 16 partials and 5 left.
fused() {
  local name=$1
  shift
  "$compile" --no-cache --arch "$arch" --fused-merge --with-lse "$@" \
    -o "$dir/fused_$name" >/dev/null
}
fused gqa_f16 --head-dim 128 --num-q-heads 8 --num-kv-heads 2 --dtype f16 \
  --num-splits 5
fused mqa_tiles --head-dim 128 --num-q-heads 32 --num-kv-heads 1 --dtype f16 \
  --num-splits 7
fused paged_spec --head-dim 128 --num-q-heads 8 --num-kv-heads 2 \
  --dtype bf16 --num-splits 6 --page-size 64 --kv-layout HND --query-len 8
fused qlens_every_feature --head-dim 128 --num-q-heads 8 --num-kv-heads 2 \
  --dtype f16 --num-splits 4 --query-len 4 --window-left 3 \
  --logits-soft-cap 30 --with-sinks --with-alibi --with-query-lens
fused fp8_e4m3_every_feature --head-dim 128 --num-q-heads 8 \
  --num-kv-heads 2 --dtype f16 --num-splits 4 --query-len 4 --window-left 3 \
  --logits-soft-cap 30 --with-sinks --with-alibi --with-query-lens \
  --kv-dtype e4m3 --kv-scale token-head
fused mha_s16 --head-dim 128 --num-q-heads 4 --num-kv-heads 4 --dtype f16 \
  --num-splits 16
fused gqa8_d96_spec4 --head-dim 96 --num-q-heads 32 --num-kv-heads 4 \
  --dtype bf16 --num-splits 3 --query-len 4
fused sinks_f32 --head-dim 128 --num-q-heads 8 --num-kv-heads 2 --dtype f32 \
  --num-splits 6 --with-sinks
fused qlens_mqa_f32_spec2 --head-dim 64 --num-q-heads 16 --num-kv-heads 1 \
  --dtype f32 --num-splits 7 --query-len 2 --with-query-lens
fused mqa_f32_spec2_s48 --head-dim 64 --num-q-heads 32 --num-kv-heads 1 \
  --dtype f32 --num-splits 48 --query-len 2
fused gqa_bf16_s37 --head-dim 128 --num-q-heads 8 --num-kv-heads 2 \
  --dtype bf16 --num-splits 37
