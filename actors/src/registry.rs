//! The Supervisor's long-lived children, kept in one registry: a child is one [`Child`] made
//! from its start function, and the watchdog, the debug snapshot and fault injection are one
//! loop each over [`Registry`]. actix's own `Supervised` restarts an actor only when it stops,
//! not when a handler panics (the panic closes the mailbox), hence this.
//!
//! Children run on the Supervisor's arbiter (one thread), so the handles share state with `Rc`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use actix::dev::ToEnvelope;
use actix::prelude::*;
use dockerlet_messages::debug::{ActorState, GetActorState, Panic};
use futures::future::{BoxFuture, LocalBoxFuture};

/// How long a child may take to answer a debug query.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// What the Supervisor must do after a child was re-created, since the new instance starts empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRestart {
    /// Nothing: the child rebuilds its state by itself (from Docker, its source or the API).
    Nothing,
    /// Every PodWorker tells the new ProbeActor its containers again (`ResendProbeTargets`).
    ResendProbeTargets,
    /// Every PodWorker sends the new StatusActor its pod's status again (`PublishStatus`).
    PublishStatus,
}

/// A child as the registry sees it, whatever its actor type.
trait Supervised {
    fn kind(&self) -> &'static str;
    fn name(&self) -> &'static str;
    /// Its mailbox is closed: it panicked or stopped.
    fn dead(&self) -> bool;
    /// Start a new instance in its place.
    fn restart(&self);
    /// Its own account of itself, with the restart count.
    fn state(&self) -> BoxFuture<'static, Option<ActorState>>;
    /// Make it panic (fault injection).
    fn panic(&self);
    fn after_restart(&self) -> AfterRestart;
}

struct Slot<A: Actor> {
    kind: &'static str,
    name: &'static str,
    addr: RefCell<Addr<A>>,
    restarts: Cell<u32>,
    start: Box<dyn Fn() -> Addr<A>>,
    after_restart: AfterRestart,
}

/// A typed handle on a supervised child: always the current instance, also after a restart.
pub struct Child<A: Actor> {
    slot: Rc<Slot<A>>,
}

impl<A: Actor> Clone for Child<A> {
    fn clone(&self) -> Self {
        Child {
            slot: self.slot.clone(),
        }
    }
}

impl<A> Child<A>
where
    A: Actor<Context = Context<A>> + Handler<GetActorState> + Handler<Panic>,
{
    /// Start the child with `start`, which the watchdog calls again to re-create it; its kind
    /// and name are the actor's [`Inspect`](crate::inspect::Inspect) constants.
    pub fn start(after_restart: AfterRestart, start: impl Fn() -> Addr<A> + 'static) -> Self
    where
        A: crate::inspect::Inspect,
    {
        let addr = start();
        Child {
            slot: Rc::new(Slot {
                kind: A::KIND,
                name: A::NAME,
                addr: RefCell::new(addr),
                restarts: Cell::new(0),
                start: Box::new(start),
                after_restart,
            }),
        }
    }

    /// The current instance's address.
    pub fn addr(&self) -> Addr<A> {
        self.slot.addr.borrow().clone()
    }

    /// Send to the current instance, dropping the message if its mailbox is closed (the watchdog
    /// re-creates it within a period, and the new instance rebuilds what the message carried).
    pub fn do_send<M>(&self, msg: M)
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: ToEnvelope<A, M>,
    {
        self.slot.addr.borrow().do_send(msg);
    }
}

impl<A> Supervised for Slot<A>
where
    A: Actor<Context = Context<A>> + Handler<GetActorState> + Handler<Panic>,
{
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn dead(&self) -> bool {
        !self.addr.borrow().connected()
    }

    fn restart(&self) {
        *self.addr.borrow_mut() = (self.start)();
        self.restarts.set(self.restarts.get() + 1);
    }

    fn state(&self) -> BoxFuture<'static, Option<ActorState>> {
        Box::pin(ask(self.addr.borrow().clone(), self.restarts.get()))
    }

    fn panic(&self) {
        self.addr.borrow().do_send(Panic);
    }

    fn after_restart(&self) -> AfterRestart {
        self.after_restart
    }
}

/// Ask an actor for its state, within [`QUERY_TIMEOUT`]; `restarts` is the registry's count.
pub async fn ask<A>(addr: Addr<A>, restarts: u32) -> Option<ActorState>
where
    A: Actor<Context = Context<A>> + Handler<GetActorState>,
{
    let mut state = tokio::time::timeout(QUERY_TIMEOUT, addr.send(GetActorState))
        .await
        .ok()?
        .ok()?;
    state.restarts = restarts;
    Some(state)
}

/// A child that was re-created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restarted {
    /// Its actor type (`PlegActor`).
    pub kind: &'static str,
    /// Its name (`pleg`).
    pub name: &'static str,
    /// What the Supervisor must do now.
    pub after: AfterRestart,
}

/// Every long-lived child, in start order.
#[derive(Default)]
pub struct Registry {
    children: Vec<Rc<dyn Supervised>>,
}

impl Registry {
    /// Supervise `child` from now on.
    pub fn add<A>(&mut self, child: &Child<A>)
    where
        A: Actor<Context = Context<A>> + Handler<GetActorState> + Handler<Panic>,
    {
        self.children.push(child.slot.clone());
    }

    /// [`Registry::add`] for a child that exists only in some modes.
    pub fn add_some<A>(&mut self, child: &Option<Child<A>>)
    where
        A: Actor<Context = Context<A>> + Handler<GetActorState> + Handler<Panic>,
    {
        if let Some(child) = child {
            self.add(child);
        }
    }

    /// Re-create every child whose mailbox closed; returns them.
    pub fn restart_dead(&self) -> Vec<Restarted> {
        self.children
            .iter()
            .filter(|c| c.dead())
            .map(|c| {
                c.restart();
                Restarted {
                    kind: c.kind(),
                    name: c.name(),
                    after: c.after_restart(),
                }
            })
            .collect()
    }

    /// Every child's state query, to be awaited together.
    pub fn states(&self) -> Vec<BoxFuture<'static, Option<ActorState>>> {
        self.children.iter().map(|c| c.state()).collect()
    }

    /// Make the child named `name` (its registry name or its kind) panic; false when there is
    /// none.
    pub fn panic(&self, name: &str) -> bool {
        let child = self.children.iter().find(|c| c.name() == name || c.kind() == name);
        child.inspect(|c| c.panic()).is_some()
    }
}

/// Where an actor sends one kind of message: a fixed [`Recipient`], or a supervised [`Child`]
/// through its slot, so a message always reaches the child's current instance, also after the
/// watchdog re-created it. Cloneable; `Rc`-based like [`Child`], for actors on the Supervisor's
/// arbiter.
pub struct Link<M: Message> {
    target: Rc<dyn Target<M>>,
}

impl<M: Message> Clone for Link<M> {
    fn clone(&self) -> Self {
        Link {
            target: self.target.clone(),
        }
    }
}

/// What a [`Link`] sends to.
trait Target<M: Message> {
    fn do_send(&self, msg: M);
    fn send(&self, msg: M) -> LocalBoxFuture<'static, Result<M::Result, MailboxError>>;
}

impl<M> Target<M> for Recipient<M>
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    fn do_send(&self, msg: M) {
        Recipient::do_send(self, msg);
    }

    fn send(&self, msg: M) -> LocalBoxFuture<'static, Result<M::Result, MailboxError>> {
        Box::pin(Recipient::send(self, msg))
    }
}

impl<A, M> Target<M> for Child<A>
where
    A: Actor<Context = Context<A>> + Handler<GetActorState> + Handler<Panic> + Handler<M>,
    M: Message + Send + 'static,
    M::Result: Send,
{
    fn do_send(&self, msg: M) {
        Child::do_send(self, msg);
    }

    fn send(&self, msg: M) -> LocalBoxFuture<'static, Result<M::Result, MailboxError>> {
        Box::pin(self.addr().send(msg))
    }
}

impl<M> Link<M>
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    /// Send, dropping the message if the target's mailbox is closed.
    pub fn do_send(&self, msg: M) {
        self.target.do_send(msg);
    }

    /// Send and wait for the answer.
    pub fn send(&self, msg: M) -> LocalBoxFuture<'static, Result<M::Result, MailboxError>> {
        self.target.send(msg)
    }
}

impl<M> From<Recipient<M>> for Link<M>
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    fn from(recipient: Recipient<M>) -> Self {
        Link {
            target: Rc::new(recipient),
        }
    }
}

impl<A> Child<A>
where
    A: Actor<Context = Context<A>> + Handler<GetActorState> + Handler<Panic>,
{
    /// A [`Link`] to whichever instance of this child is current.
    pub fn link<M>(&self) -> Link<M>
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send,
    {
        Link {
            target: Rc::new(self.clone()),
        }
    }

    /// Ask the current instance, `within` a time limit if one is given; the answer's default
    /// when the child does not answer (it is being re-created, or too slow).
    pub fn query<M>(&self, msg: M, within: Option<Duration>) -> LocalBoxFuture<'static, M::Result>
    where
        A: Handler<M>,
        M: Message + Send + 'static,
        M::Result: Send + Default,
    {
        let asked = self.addr().send(msg);
        Box::pin(async move {
            match within {
                Some(limit) => tokio::time::timeout(limit, asked).await.ok().and_then(Result::ok),
                None => asked.await.ok(),
            }
            .unwrap_or_default()
        })
    }
}
