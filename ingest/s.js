/* Waymark tracker, minified by hand; what it does is in ingest/script.go */
(function(w,d){try{
var L=w.location,N=w.navigator,H=w.history,now=Date.now,M=Math,
el=d.currentScript||d.querySelector('script[data-domain]'),
at=function(n){return el&&el.getAttribute(n)},
has=function(n){return at(n)!=null},
domain=at('data-domain')||L.hostname,
api=at('data-api')||(el&&el.src?new URL(el.src).origin:'')+'/api/event',
hash=has('data-hash'),
page=null,url,engaged=0,since=0,top=0,height=1,sent=-1,
visible=function(){return d.visibilityState=='visible'&&!d.prerendering},
safe=function(f){return function(){try{return f.apply(this,arguments)}catch(e){}}},
skip=function(){
return!has('data-local')&&(/^(localhost|127(\.\d+){1,3}|\[::1?\])$/.test(L.hostname)||L.protocol=='file:')||
(N.webdriver||w._phantom||w.__nightmare||w.Cypress)&&!w.__waymark},
send=function(b,beacon,cb){
if(skip())return cb&&cb();
if(hash)b.h=1;
b=JSON.stringify(b);
if(beacon&&N.sendBeacon&&N.sendBeacon(api,b))return cb&&cb();
var x=new XMLHttpRequest;
x.open('POST',api);
x.setRequestHeader('Content-Type','text/plain');
x.onreadystatechange=function(){x.readyState==4&&cb&&cb()};
x.send(b)},
event=function(n,u){return{n:n,u:u||L.href,d:domain,r:d.referrer||null,w:w.innerWidth}},
scrolled=safe(function(){
var e=d.documentElement,b=d.body||e;
height=M.max(e.scrollHeight,b.scrollHeight)||1;
top=M.max(top,M.min(height,(w.pageYOffset||e.scrollTop||0)+w.innerHeight))}),
engagement=function(){
if(page==null)return;
if(since)engaged+=now()-since;
since=0;
if(top<=sent&&engaged<3e3)return;
var b=event('engagement',url);
b.e=engaged;
b.sd=M.min(100,M.round(100*top/height));
sent=top;
engaged=0;
send(b,1)},
hide=safe(function(){scrolled();engagement()}),
pageview=safe(function(again){
var key=L.pathname+(hash?L.hash:'');
if(key==page&&again!==1)return;
engagement(); // the page left, before the next
page=key;
url=L.href;
engaged=top=0;
sent=-1;
since=visible()?now():0;
(w.requestAnimationFrame||setTimeout)(scrolled);
send(event('pageview'))}),
seen=safe(function(){
if(page==null)return visible()&&pageview();
if(!visible()||!d.hasFocus())return hide();
since=since||now()}),
track=safe(function(n,o){
o=o||{};
var b=event(n);
if(o.props)b.p=o.props;
if(o.interactive===false)b.i=false;
send(b,0,o.callback)}),
out=has('data-outbound-links'),
dl=has('data-file-downloads'),
types=(at('file-types')||'pdf,xlsx,docx,txt,rtf,csv,exe,key,pps,ppt,pptx,7z,pkg,rar,gz,zip,avi,mov,mp4,mpeg,wmv,midi,mp3,wav,wma,dmg').split(',').concat((at('add-file-types')||'').split(',')),
link=function(n,u){var b=event(n);b.p={url:u};send(b,1)},
click=safe(function(e){
if(e.type=='auxclick'&&e.button!=1)return;
for(var a=e.target;a&&!(a.tagName&&a.tagName.toLowerCase()=='a'&&typeof a.href=='string'&&a.href);a=a.parentNode);
if(!a)return;
var u=a.href.split('?')[0],x=u.split('.').pop();
if(out&&a.host&&a.host!=L.host)link('Outbound Link: Click',a.href);
else if(dl&&x&&types.indexOf(x)>=0)link('File Download',u)}),
wrap=function(m){var f=H[m];if(f)H[m]=function(){var r=f.apply(this,arguments);pageview();return r}},
on=function(t,n,f){t.addEventListener(n,f,{passive:!0})},
q=[].concat((w.waymark||0).q||[],(w.plausible||0).q||[]),i=0;
if(out||dl){on(d,'click',click);on(d,'auxclick',click)}
wrap('pushState');
wrap('replaceState');
on(w,'popstate',pageview);
on(w,'hashchange',pageview);
on(w,'scroll',scrolled);
on(w,'load',scrolled);
on(w,'pagehide',hide);
on(w,'pageshow',function(e){e.persisted&&pageview(1)});
on(w,'focus',seen);
on(w,'blur',seen);
on(d,'visibilitychange',seen);
on(d,'prerenderingchange',seen);
w.plausible=w.waymark=track;
for(;i<q.length;i++)track.apply(null,q[i]);
seen()
}catch(e){}})(window,document);
