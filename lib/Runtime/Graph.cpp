//===- Graph.cpp - Capture decode plans into a CUDA graph, replay it ------===//

#include "fd/Runtime/Runtime.h"

#include <exception>
#include <stdexcept>
#include <utility>

namespace flashdecode::rt {

Graph Graph::capture(const Device &device,
                     const std::vector<const DecodePlan *> &plans,
                     CUstream stream) {
  return capture(device, plans, stream, [&](CUstream captured) {
    for (const DecodePlan *plan : plans)
      plan->launch(captured);
  });
}

Graph Graph::capture(const Device &device,
                     const std::vector<const DecodePlan *> &plans,
                     CUstream stream,
                     const std::function<void(CUstream)> &record) {
  const DriverApi &driver = device.getDriverApi();
  if (!stream)
    throw std::invalid_argument(
        "Graph::capture: the legacy default stream cannot be captured; "
        "pass a stream made with cuStreamCreate");
  Graph result(device);
  device.makeCurrent();
  check(driver,
        driver.cuStreamBeginCapture(stream, kStreamCaptureModeThreadLocal),
        "beginning a CUDA graph capture");
  std::exception_ptr launchFailure;
  try {
    record(stream);
    for (const DecodePlan *plan : plans)
      result.plans.emplace_back(plan, plan->getGeneration());
  } catch (...) {
    launchFailure = std::current_exception();
  }
  // Always end the capture, or the stream stays in capture mode.
  CUresult ended = driver.cuStreamEndCapture(stream, &result.graph);
  if (launchFailure)
    std::rethrow_exception(launchFailure);
  check(driver, ended, "ending the CUDA graph capture");
  size_t nodes = 0;
  check(driver, driver.cuGraphGetNodes(result.graph, nullptr, &nodes),
        "counting the captured graph's nodes");
  if (nodes == 0)
    throw CudaError("captured an empty CUDA graph: no kernel was launched "
                    "during the capture",
                    -1);
  check(driver,
        driver.cuGraphInstantiateWithFlags(&result.executable, result.graph, 0),
        "instantiating the captured CUDA graph");
  return result;
}

Graph::~Graph() { release(); }

Graph::Graph(Graph &&other) noexcept
    : device(other.device), driver(other.driver),
      graph(std::exchange(other.graph, nullptr)),
      executable(std::exchange(other.executable, nullptr)),
      plans(std::move(other.plans)) {}

Graph &Graph::operator=(Graph &&other) noexcept {
  if (this != &other) {
    release();
    device = other.device;
    driver = other.driver;
    graph = std::exchange(other.graph, nullptr);
    executable = std::exchange(other.executable, nullptr);
    plans = std::move(other.plans);
  }
  return *this;
}

void Graph::release() {
  if (executable)
    driver->cuGraphExecDestroy(executable);
  if (graph)
    driver->cuGraphDestroy(graph);
  executable = nullptr;
  graph = nullptr;
}

bool Graph::isStale() const {
  for (const auto &[plan, generation] : plans)
    if (plan->getGeneration() != generation)
      return true;
  return false;
}

void Graph::replay(CUstream stream) const {
  if (!executable)
    throw std::invalid_argument("Graph::replay: this graph was moved from");
  if (isStale())
    throw std::invalid_argument(
        "Graph::replay: a captured plan was rebound to other buffers or "
        "shapes since the capture; capture a new graph");
  device->makeCurrent();
  check(*driver, driver->cuGraphLaunch(executable, stream),
        "replaying the CUDA graph");
}

} // namespace flashdecode::rt
