// NodeImpl: the shard ports. Each partition worker listens on a port of its own and serves
// clients' invocations there on its own thread (NodeOptions::shardPorts).
#include <future>
#include <string>
#include <utility>

#include <asio/post.hpp>

#include "cluster/node_impl.h"

namespace ingrid {

Result<bool> NodeImpl::startShardPorts(const TransportOptions& base) {
  if (!options_.shardPorts || options_.partitionsOnNetworkThread) return true;
  const unsigned workers = data_->workerCount();
  if (options_.shardPortBase != 0 && options_.shardPortBase + workers - 1 > 65535) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.shardPortBase " + std::to_string(options_.shardPortBase) + " with " +
                     std::to_string(workers) + " workers runs past port 65535");
  }
  TransportOptions o = base;
  o.shared = transport_->shared();  // the member port's connection and buffer limits cover all
  for (unsigned w = 0; w < workers; ++w) {
    o.listenPort =
        options_.shardPortBase == 0 ? 0 : static_cast<std::uint16_t>(options_.shardPortBase + w);
    shardHandlers_.push_back(std::make_unique<ShardHandler>(*this, w));
    auto transport = std::make_unique<Transport>(data_->workerIo(w), o, *shardHandlers_.back());
    Result<std::uint16_t> port = transport->listen();
    if (!port) {
      return Error(port.error().code(), "shard port of worker " + std::to_string(w) + " (" +
                                            o.listenHost + ":" + std::to_string(o.listenPort) +
                                            "): " + port.error().detail());
    }
    shardPorts_.push_back(*port);
    replicaLinks_.push_back(std::make_unique<ShardLinks>(
        *transport, [this](MemberId id) { return shardLinkOptions(id); }));
    replicaLinksAs_.push_back(0);
    shardTransports_.push_back(std::move(transport));
  }
  return true;
}

void NodeImpl::stopShardPorts() {
  // From outside the workers: each worker closes its replica links, then its transport closes its
  // listener and connections there.
  closeReplicaLinks();
  for (auto& t : shardTransports_) t->stop();
}

std::shared_ptr<Peer> NodeImpl::replicaLink(unsigned w, const MemberInfo& member, PartitionId p) {
  if (w >= replicaLinks_.size()) return nullptr;  // no shard ports here
  // A link says Hello as the member this node was when it dialed: once that changes (a rejoin
  // under a new id), the old links go, and none is made without an id (the member link then
  // refuses to dial too).
  const MemberId self = memberId();
  if (replicaLinksAs_[w] != self) {
    replicaLinks_[w]->closeAll();
    replicaLinksAs_[w] = self;
  }
  if (self == 0) return nullptr;
  return replicaLinks_[w]->forStream(member, p);
}

void NodeImpl::retainReplicaLinks(const TopologyPtr& t) {
  for (unsigned w = 0; w < replicaLinks_.size(); ++w) {
    asio::post(data_->workerIo(w),
               [this, w, t] { replicaLinks_[w]->retain(*t, options_.requestTimeout); });
  }
}

void NodeImpl::closeReplicaLinks() {
  for (unsigned w = 0; w < replicaLinks_.size(); ++w) {
    asio::post(data_->workerIo(w), [this, w] { replicaLinks_[w]->closeAll(); });
  }
}

void NodeImpl::TEST_closeShardPorts() {
  stopShardPorts();
  // Each transport's stop() posted its closes to its worker: a task posted behind them runs after.
  for (unsigned w = 0; w < shardTransports_.size(); ++w) {
    std::promise<void> closed;
    asio::post(data_->workerIo(w), [&closed] { closed.set_value(); });
    closed.get_future().wait();
  }
}

void NodeImpl::onShardRequest(unsigned w, const std::shared_ptr<Connection>& conn, Frame frame) {
  const FrameHeader header = frame.header;
  const auto memberPort = [&] {
    return std::string(messageTypeName(header.type)) + " is not taken on a shard port (worker " +
           std::to_string(w) + " of member " + std::to_string(memberId()) +
           "): send it to the member's port " + selfAddress_;
  };
  if (!admitted(conn, frame, Port::kShard)) return;
  try {
    switch (header.type) {
      // A client's, or a member's (proving the cluster secret, if there is one, as on the member
      // port) that forwards its embedded calls here. A member's connection here is not its member
      // link (membership and replication stay there): it only carries calls, exempt from the
      // limits set for clients.
      case MessageType::kHello:
        return handleHello(conn, std::move(frame), /*link=*/false);
      case MessageType::kAuth:
        return handleAuth(conn, std::move(frame), /*link=*/false);
      case MessageType::kInvoke:
        return data_->handleShardInvoke(w, conn, std::move(frame));
      // From a member's worker: the updates and snapshots of the partitions this worker owns, on
      // their primary's worker's link (a shard per thread), applied here.
      case MessageType::kReplicate:
        return data_->handleReplicate(conn, std::move(frame));
      case MessageType::kSnapshot:
        return data_->handleSnapshot(conn, std::move(frame));
      default:
        break;
    }
    conn->replyError(header, Error(Errc::protocol_error, memberPort()));
  } catch (const std::exception& e) {
    conn->replyError(header,
                     Error(Errc::malformed_message, std::string(messageTypeName(header.type)) +
                                                        " body does not decode: " + e.what()));
  }
}

}  // namespace ingrid
