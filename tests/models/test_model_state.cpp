// ModelState: the evolving state of any model as a copyable value, written and read by one
// piece of code for every model (model_state.hpp), and Model::setState's checks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/byte_stream.hpp"
#include "models/model.hpp"
#include "shellsim/errors.hpp"

namespace shellsim {
namespace {

// Springs between consecutive nodes of a line whose rest lengths creep towards the current
// ones (a minimal plastic model): its state is the rest lengths, a step counter and cuts.
class CreepingLine : public Model {
 public:
  explicit CreepingLine(int32_t nodes, std::string name = "creeping_line")
      : name_(std::move(name)),
        masses_(static_cast<size_t>(nodes), 1.0),
        rest_(static_cast<size_t>(nodes - 1), 1.0) {}

  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] int32_t nodeCount() const override { return static_cast<int32_t>(masses_.size()); }
  [[nodiscard]] int64_t elementCount() const override { return static_cast<int64_t>(rest_.size()); }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return masses_; }
  using Model::addGradient;
  using Model::energy;
  using Model::updateInelastic;
  [[nodiscard]] EnergyParts energy(std::span<const double> x, ModelWorkspace*) const override {
    double e = 0;
    for (size_t s = 0; s < rest_.size(); ++s) {
      const double d = length(x, s) - rest_[s];
      e += 0.5 * d * d;
    }
    return {e, 0.0};
  }
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace* workspace) const override {
    for (size_t s = 0; s < rest_.size(); ++s) {
      const double l = length(x, s);
      for (size_t c = 0; c < 3; ++c) {
        const double g = (l - rest_[s]) * (x[3 * s + 3 + c] - x[3 * s + c]) / l;
        gradient[3 * s + c] -= g;
        gradient[3 * s + 3 + c] += g;
      }
    }
    return energy(x, workspace);
  }
  [[nodiscard]] double stableTimeStep() const override { return 0.1; }
  [[nodiscard]] Geometry surface(std::span<const double> x) const override {
    Geometry g;
    g.positions.assign(x.begin(), x.end());
    return g;
  }
  InelasticReport updateInelastic(std::span<const double> x, double dt, ModelWorkspace*) override {
    for (size_t s = 0; s < rest_.size(); ++s) rest_[s] += 0.5 * dt * (length(x, s) - rest_[s]);
    ++steps_;
    CrackDisc cut;
    cut.radius = 0.1 * static_cast<double>(steps_);
    cuts_.push_back(cut);
    return {static_cast<int64_t>(rest_.size()), 0, {}};
  }
  void listStateFields(StateFields& fields) override {
    fields.add("rest", &rest_, StateShape::kPerElement);
    fields.add("steps", &steps_);
    fields.add("cuts", &cuts_);
  }
  void stateAssigned() override {
    ++assignments;
    if (steps_ < 0) throw InputError(name_ + ": a negative step count");
  }

  [[nodiscard]] const std::vector<double>& rest() const { return rest_; }
  int assignments = 0;

 private:
  static double length(std::span<const double> x, size_t s) {
    double sum = 0;
    for (size_t c = 0; c < 3; ++c) sum += std::pow(x[3 * s + 3 + c] - x[3 * s + c], 2);
    return std::sqrt(sum);
  }
  std::string name_;
  std::vector<double> masses_, rest_;
  int64_t steps_ = 0;
  std::vector<CrackDisc> cuts_;
};

std::vector<double> stretchedLine(int32_t nodes, double spacing) {
  std::vector<double> x(3 * static_cast<size_t>(nodes), 0.0);
  for (int32_t i = 0; i < nodes; ++i) x[3 * static_cast<size_t>(i)] = spacing * i;
  return x;
}

std::string inputErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no InputError";
}

TEST(ModelState, IsACopyThatOutlivesLaterChangesAndPutsTheModelBack) {
  CreepingLine line(5);
  const std::vector<double> x = stretchedLine(5, 1.5);
  const ModelState start = line.state();
  ASSERT_FALSE(start.empty());
  EXPECT_EQ(start.nodeCount(), 5);
  EXPECT_EQ(start.fields().size(), 3u);
  const ModelState copy = start;  // a value: copies are equal and independent of the model
  for (int i = 0; i < 4; ++i) (void)line.updateInelastic(x, 0.1);
  EXPECT_GT(line.energy(x).total(), 0.0);
  EXPECT_LT(line.energy(x).total(), CreepingLine(5).energy(x).total());
  const double flowedEnergy = line.energy(x).total();
  const ModelState flowed = line.state();
  line.setState(copy);
  EXPECT_EQ(line.rest(), std::vector<double>(4, 1.0));
  EXPECT_EQ(line.energy(x).total(), CreepingLine(5).energy(x).total());
  line.setState(flowed);
  EXPECT_EQ(line.energy(x).total(), flowedEnergy);
  // An elastic model has no state: empty, and only an empty state fits it.
  class Rigid : public CreepingLine {
   public:
    Rigid() : CreepingLine(2) {}
    void listStateFields(StateFields&) override {}
  } rigid;
  EXPECT_TRUE(rigid.state().empty());
  EXPECT_FALSE(rigid.hasState());
  rigid.setState(ModelState{});
  EXPECT_NE(inputErrorOf([&] { rigid.setState(flowed); }).find("no evolving state"),
            std::string::npos);
  EXPECT_NE(inputErrorOf([&] { line.setState(ModelState{}); }).find("the state is empty"),
            std::string::npos);
}

TEST(ModelState, WrittenAndReadBackBitForBit) {
  CreepingLine line(6);
  const std::vector<double> x = stretchedLine(6, 1.3);
  for (int i = 0; i < 3; ++i) (void)line.updateInelastic(x, 0.07);
  ByteWriter out;
  line.state().write(out);
  ByteReader in(out.bytes(), "state.bin");
  const ModelState read = ModelState::read(in);
  EXPECT_TRUE(in.atEnd());
  CreepingLine fresh(6);
  fresh.setState(read);
  EXPECT_EQ(fresh.rest(), line.rest());
  EXPECT_EQ(fresh.energy(x).total(), line.energy(x).total());
  ByteWriter again;
  fresh.state().write(again);
  EXPECT_EQ(again.bytes(), out.bytes());
}

TEST(ModelState, AStateThatDoesNotFitIsRefusedAndTheModelStaysAsItWas) {
  CreepingLine line(5);
  const std::vector<double> x = stretchedLine(5, 1.5);
  (void)line.updateInelastic(x, 0.1);
  const std::vector<double> rest = line.rest();
  const int assignmentsBefore = line.assignments;

  CreepingLine longer(7);
  EXPECT_NE(inputErrorOf([&] { line.setState(longer.state()); }).find("nodes"), std::string::npos);
  CreepingLine renamed(5, "other_line");
  EXPECT_NE(inputErrorOf([&] { line.setState(renamed.state()); }).find("of model other_line"),
            std::string::npos);
  ByteWriter out;
  line.state().write(out);
  const std::vector<uint8_t> bytes = out.bytes();
  // A field of another type, and a step count the model's own check refuses after the
  // assignment.
  std::vector<double> restValues(4, 2.0);
  std::vector<CrackDisc> cuts;
  const auto stateWithSteps = [&](auto steps) {
    StateFields fields;
    fields.add("rest", &restValues, StateShape::kPerElement);
    fields.add("steps", &steps);
    fields.add("cuts", &cuts);
    return ModelState("creeping_line", 5, fields);
  };
  EXPECT_NE(inputErrorOf([&] {
              line.setState(stateWithSteps(int32_t{2}));
            }).find("field 'steps' is int32, any length; the model's is int64, any length"),
            std::string::npos);
  const ModelState negative = stateWithSteps(int64_t{-3});
  EXPECT_NE(inputErrorOf([&] { line.setState(negative); }).find("negative step count"),
            std::string::npos);
  EXPECT_EQ(line.rest(), rest) << "put back after the refusal";
  EXPECT_GT(line.assignments, assignmentsBefore);
  // Bytes that are not a state: a bad type tag, a truncation.
  {
    std::vector<uint8_t> badType = bytes;
    // The first field's type tag follows model name, node count, field count, the field's
    // name, shape and components.
    const size_t tag = 8 + std::string("creeping_line").size() + 4 + 8 + 8 + 4 + 1 + 1;
    badType[tag] = 99;
    ByteReader in(badType, "bad.bin");
    EXPECT_NE(inputErrorOf([&] { (void)ModelState::read(in); }).find("bad.bin"), std::string::npos);
    ByteReader cut(std::span<const uint8_t>(bytes).first(bytes.size() - 5), "cut.bin");
    EXPECT_NE(inputErrorOf([&] { (void)ModelState::read(cut); }).find("cut.bin: truncated"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace shellsim
