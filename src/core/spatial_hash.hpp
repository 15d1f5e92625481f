// A spatial hash of axis-aligned boxes (Teschner et al. 2003, "Optimized spatial hashing
// for collision detection of deformable objects", the structure steinemann section 3.2
// uses for its triangle tests): space is cut into cubic cells of side c, cell (i, j, k)
// maps to bucket (i 73856093 xor j 19349663 xor k 83492791) mod N, N a prime about twice
// the number of entries, and every box is entered in the bucket of each cell it touches.
//
// The buckets are stored flat (counting sort, CSR) and rebuilt whole by build(); Teschner's
// per-cell timestamps serve the same purpose (no clearing between builds). Each entry keeps
// a copy of its box, so a query reads its buckets front to back and reports only the boxes
// that overlap it, each once: the one cell that holds the lower corner of the overlap
// reports it (a box in several cells of the query, or two cells sharing a bucket, would
// otherwise come again).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

namespace shellsim {

class SpatialHash {
 public:
  // Enters `boxes`, shape (nBoxes, 6): min x, y, z, max x, y, z, with cells of side
  // `cellSize` (> 0, m). A box spanning kMaxCellsPerAxis cells or more along an axis (or
  // not finite) is kept in an overflow list instead, which every query looks at.
  void build(std::span<const double> boxes, double cellSize) {
    if (!(cellSize > 0) || !std::isfinite(cellSize)) {
      throw std::invalid_argument("SpatialHash: cell size must be positive and finite");
    }
    inverseCell_ = 1 / cellSize;
    const auto count = static_cast<int64_t>(boxes.size() / 6);
    std::vector<CellRange> ranges(static_cast<size_t>(count));
    std::vector<char> fits(static_cast<size_t>(count));
    int64_t cells = 0;
    overflow_.clear();
    for (int64_t i = 0; i < count; ++i) {
      const auto si = static_cast<size_t>(i);
      fits[si] = cellRange(boxes.subspan(6 * si, 6), ranges[si]) ? 1 : 0;
      if (!fits[si]) {
        overflow_.push_back({static_cast<int32_t>(i), boxOf(boxes, si)});
        continue;
      }
      const CellRange& r = ranges[si];
      cells += (r.hi[0] - r.lo[0] + 1) * (r.hi[1] - r.lo[1] + 1) * (r.hi[2] - r.lo[2] + 1);
    }
    bucketCount_ = nextPrime(std::max<int64_t>(2 * cells, 17));
    start_.assign(static_cast<size_t>(bucketCount_) + 1, 0);
    // Count per bucket, then fill; a box enters a bucket once even where two of its cells
    // share it.
    std::vector<int64_t> buckets;
    const auto bucketsOf = [&](const CellRange& range) {
      buckets.clear();
      forEachBucket(range,
                    [&](int64_t bucket, int64_t, int64_t, int64_t) { buckets.push_back(bucket); });
      std::sort(buckets.begin(), buckets.end());
      buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
    };
    for (int64_t i = 0; i < count; ++i) {
      if (!fits[static_cast<size_t>(i)]) continue;
      bucketsOf(ranges[static_cast<size_t>(i)]);
      for (const int64_t bucket : buckets) ++start_[static_cast<size_t>(bucket) + 1];
    }
    for (int64_t b = 0; b < bucketCount_; ++b)
      start_[static_cast<size_t>(b) + 1] += start_[static_cast<size_t>(b)];
    entries_.resize(static_cast<size_t>(start_.back()));
    std::vector<int64_t> fill(start_.begin(), start_.end() - 1);
    for (int64_t i = 0; i < count; ++i) {
      const auto si = static_cast<size_t>(i);
      if (!fits[si]) continue;
      const Entry entry{static_cast<int32_t>(i), boxOf(boxes, si)};
      bucketsOf(ranges[si]);
      for (const int64_t bucket : buckets)
        entries_[static_cast<size_t>(fill[static_cast<size_t>(bucket)]++)] = entry;
    }
  }

  // Calls visit(i) once for every entered box i that overlaps `box` (6 values as above;
  // touching counts), in an order fixed by the hash.
  template <class Visit>
  void forEachOverlap(std::span<const double> box, const Visit& visit) const {
    const std::array<double, 6> q = {box[0], box[1], box[2], box[3], box[4], box[5]};
    for (const Entry& e : overflow_) {
      if (overlaps(e.box, q)) visit(e.index);
    }
    CellRange range{};
    if (!cellRange(box, range)) {
      // A query too large for cells: every entry, each once (from the cell of its lower corner
      // clamped to the query), by a scan.
      std::vector<char> seen;
      for (const Entry& e : entries_) {
        if (!overlaps(e.box, q)) continue;
        if (seen.empty()) seen.assign(static_cast<size_t>(maxIndex()) + 1, 0);
        if (seen[static_cast<size_t>(e.index)]) continue;
        seen[static_cast<size_t>(e.index)] = 1;
        visit(e.index);
      }
      return;
    }
    forEachBucket(range, [&](int64_t bucket, int64_t x, int64_t y, int64_t z) {
      const int64_t cell[3] = {x, y, z};
      for (int64_t k = start_[static_cast<size_t>(bucket)];
           k < start_[static_cast<size_t>(bucket) + 1]; ++k) {
        const Entry& e = entries_[static_cast<size_t>(k)];
        if (!overlaps(e.box, q)) continue;
        // Report from the cell of the overlap's lower corner only.
        bool home = true;
        for (int a = 0; a < 3 && home; ++a) {
          home =
              static_cast<int64_t>(std::floor(std::max(e.box[a], q[a]) * inverseCell_)) == cell[a];
        }
        if (home) visit(e.index);
      }
    });
  }

  // Walks the cells the segment o + s d, s in [0, length] (d unit), passes through, in
  // order (Amanatides and Woo 1987), and calls visit(indices, exitDistance) with the boxes
  // of each cell's bucket (some more than once, some not overlapping the cell) and the s at
  // which the segment leaves the cell; visit returns true to stop (a hit before exitDistance
  // cannot be beaten by a later cell: a box that holds it touches this cell). The overflow
  // boxes come first.
  template <class Visit>
  void walkSegment(const double (&o)[3], const double (&d)[3], double length,
                   const Visit& visit) const {
    std::vector<int32_t> indices;
    for (const Entry& e : overflow_) indices.push_back(e.index);
    if (!indices.empty() && visit(std::span<const int32_t>(indices), 0.0)) return;
    int64_t cell[3], stepDir[3];
    double next[3], delta[3];
    for (int k = 0; k < 3; ++k) {
      const double x = o[k] * inverseCell_;
      const double c = std::floor(x);
      if (!std::isfinite(c) || std::abs(c) > 1e15) return;
      cell[k] = static_cast<int64_t>(c);
      if (d[k] != 0) {
        stepDir[k] = d[k] > 0 ? 1 : -1;
        next[k] = (d[k] > 0 ? c + 1 - x : x - c) / (std::abs(d[k]) * inverseCell_);
        delta[k] = 1 / (std::abs(d[k]) * inverseCell_);
      } else {
        stepDir[k] = 0;
        next[k] = delta[k] = std::numeric_limits<double>::infinity();
      }
    }
    for (;;) {
      const int axis =
          next[0] <= next[1] ? (next[0] <= next[2] ? 0 : 2) : (next[1] <= next[2] ? 1 : 2);
      const int64_t bucket = bucketOf(cell[0], cell[1], cell[2]);
      indices.clear();
      for (int64_t k = start_[static_cast<size_t>(bucket)];
           k < start_[static_cast<size_t>(bucket) + 1]; ++k) {
        indices.push_back(entries_[static_cast<size_t>(k)].index);
      }
      if (visit(std::span<const int32_t>(indices), std::min(next[axis], length))) return;
      if (next[axis] >= length) return;
      cell[axis] += stepDir[axis];
      next[axis] += delta[axis];
    }
  }

  static constexpr int64_t kMaxCellsPerAxis = 64;

 private:
  struct CellRange {
    int64_t lo[3], hi[3];
  };
  struct Entry {
    int32_t index;
    std::array<double, 6> box;
  };
  static std::array<double, 6> boxOf(std::span<const double> boxes, size_t i) {
    return {boxes[6 * i],     boxes[6 * i + 1], boxes[6 * i + 2],
            boxes[6 * i + 3], boxes[6 * i + 4], boxes[6 * i + 5]};
  }
  static bool overlaps(const std::array<double, 6>& a, const std::array<double, 6>& b) {
    return a[0] <= b[3] && b[0] <= a[3] && a[1] <= b[4] && b[1] <= a[4] && a[2] <= b[5] &&
           b[2] <= a[5];
  }
  [[nodiscard]] int32_t maxIndex() const {
    int32_t m = 0;
    for (const Entry& e : entries_) m = std::max(m, e.index);
    return m;
  }
  // false when the box spans too many cells (or is not finite).
  [[nodiscard]] bool cellRange(std::span<const double> box, CellRange& range) const {
    for (int k = 0; k < 3; ++k) {
      const double lo = std::floor(box[k] * inverseCell_),
                   hi = std::floor(box[3 + k] * inverseCell_);
      if (!std::isfinite(lo) || !std::isfinite(hi) || hi - lo >= kMaxCellsPerAxis ||
          std::abs(lo) > 1e15 || std::abs(hi) > 1e15) {
        return false;
      }
      range.lo[k] = static_cast<int64_t>(lo);
      range.hi[k] = static_cast<int64_t>(hi);
    }
    return true;
  }
  template <class Visit>
  void forEachBucket(const CellRange& range, const Visit& visit) const {
    for (int64_t x = range.lo[0]; x <= range.hi[0]; ++x) {
      for (int64_t y = range.lo[1]; y <= range.hi[1]; ++y) {
        for (int64_t z = range.lo[2]; z <= range.hi[2]; ++z) visit(bucketOf(x, y, z), x, y, z);
      }
    }
  }
  [[nodiscard]] int64_t bucketOf(int64_t x, int64_t y, int64_t z) const {
    // Teschner's primes; unsigned arithmetic so that negative cells wrap, not overflow.
    const uint64_t h = (static_cast<uint64_t>(x) * 73856093ULL) ^
                       (static_cast<uint64_t>(y) * 19349663ULL) ^
                       (static_cast<uint64_t>(z) * 83492791ULL);
    return static_cast<int64_t>(h % static_cast<uint64_t>(bucketCount_));
  }
  static int64_t nextPrime(int64_t n) {
    for (;; ++n) {
      bool prime = n >= 2;
      for (int64_t d = 2; d * d <= n && prime; ++d) prime = n % d != 0;
      if (prime) return n;
    }
  }

  double inverseCell_ = 1;
  int64_t bucketCount_ = 0;
  std::vector<int64_t> start_;   // (bucketCount + 1), CSR offsets into entries_
  std::vector<Entry> entries_;   // boxes, bucket by bucket
  std::vector<Entry> overflow_;  // boxes too large for cells
};

}  // namespace shellsim
