#include "runtime/model.h"

#include <gtest/gtest.h>

namespace dsd::runtime {
namespace {

// Backward's gradients match central finite differences of Forward's loss.
TEST(MlpTest, GradientsMatchFiniteDifferences) {
  Mlp m(MlpSpec{5, {7, 6}, 3, 11});
  SyntheticTask task(5, 3, 2);
  Batch b = task.Samples(0, 9);
  ASSERT_TRUE(m.Forward(b).ok());
  ASSERT_TRUE(m.Backward(1.0f).ok());
  std::vector<float> analytic(m.gradients(), m.gradients() + m.num_parameters());
  for (size_t i = 0; i < m.num_parameters(); i += 7) {
    float saved = m.parameters()[i];
    const float h = 1e-2f;
    m.parameters()[i] = saved + h;
    double up = *m.Forward(b);
    m.parameters()[i] = saved - h;
    double down = *m.Forward(b);
    m.parameters()[i] = saved;
    double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << "parameter " << i;
  }
}

TEST(MlpTest, BackwardNeedsForwardAndBatchShapeIsChecked) {
  Mlp m(MlpSpec{4, {8}, 2, 1});
  EXPECT_EQ(m.Backward(1).code(), StatusCode::kInvalidArgument);
  Batch wrong{Eigen::MatrixXf::Zero(3, 2), Eigen::MatrixXf::Zero(2, 2)};
  auto r = m.Forward(wrong);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("4 inputs"), std::string::npos);
}

TEST(SyntheticTaskTest, SamplesDoNotDependOnHowTheyAreSliced) {
  SyntheticTask t(6, 2, 9);
  Batch whole = t.MicroBatch(3, 0, 1, 0, 1, 8);
  Batch a = t.MicroBatch(3, 0, 1, 0, 2, 4), b = t.MicroBatch(3, 0, 1, 1, 2, 4);
  EXPECT_TRUE(whole.x.leftCols(4).isApprox(a.x));
  EXPECT_TRUE(whole.x.rightCols(4).isApprox(b.x));
  EXPECT_TRUE(whole.y.rightCols(4).isApprox(b.y));
  Batch other = t.MicroBatch(4, 0, 1, 0, 1, 8);
  EXPECT_FALSE(whole.x.isApprox(other.x));
}

TEST(RandomTest, GaussianHasUnitMoments) {
  double sum = 0, sq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    double g = GaussianAt(5, i);
    sum += g;
    sq += g * g;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(sq / n, 1.0, 0.05);
}

}  // namespace
}  // namespace dsd::runtime
