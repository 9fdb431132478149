"""The page's inline stylesheet and script: nothing is fetched, so the page opens offline.

The script only filters the matrix by area and verdict (also from the query string), sorts
and searches the test table and opens the collapsed block a link points into; the page
reads without it.
"""

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .3em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd} h3{margin-bottom:.2em}
.env{color:#555;margin:.2em 0}
nav#toc{margin:.6em 0;display:flex;gap:1em;flex-wrap:wrap} nav#toc a{white-space:nowrap}
#filters{margin:1em 0;display:flex;gap:1.5em;flex-wrap:wrap;align-items:center}
#filters label{white-space:nowrap}
table#matrix,table#areas,table#tests-table,table.div{border-collapse:collapse}
#matrix th,#matrix td,#areas th,#areas td{border:1px solid #ccc;padding:2px 8px;text-align:center}
#areas td.n{text-align:right;font-variant-numeric:tabular-nums} #areas td.zero{color:#bbb}
#matrix th.claim{text-align:left;font-weight:normal;font-family:monospace;white-space:nowrap}
.scroll{overflow-x:auto;max-width:100%}
#matrix td.cell a{display:block;color:inherit;text-decoration:none;font-weight:bold}
.v-holds{background:#c8ebc9}.v-violated{background:#f4b4b4}.v-expected{background:#f6dd9b}
.v-not-applicable{background:#e4e4e4;color:#666}.v-error{background:#d8c2ef}
.v-none{color:#bbb}
td.dim{opacity:.25}
td.margin{font-family:monospace;color:#444}
.legend span{display:inline-block;padding:0 .6em;margin-right:.4em;border:1px solid #ccc}
table.div td,table.div th{border:1px solid #ddd;padding:1px 6px;text-align:left;vertical-align:top;font-size:13px}
article.claim-detail{border-top:1px solid #ddd;margin-top:.3em}
article.claim-detail>details>summary h3{display:inline;font-size:1em}
section.cell-detail{margin-left:1em}
section.cell-detail:target,.cell-detail>details:target,div.test:target{outline:3px solid #3875d7}
.test,.cell-detail>details{margin:.4em 0 .6em 1em}
.cell-detail>details>summary{cursor:pointer}
.failure{border-left:4px solid #c62828;padding-left:.6em;margin:.8em 0}
.failure.v-expected-test{border-left-color:#d98c00}.failure.v-error-test{border-left-color:#6a1b9a}
.nodeid{font-family:monospace}
table.ev{border-collapse:collapse;margin:.3em 0}
table.ev td,table.ev th{border:1px solid #ddd;padding:1px 6px;font-family:monospace;font-size:12px;text-align:left}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;white-space:pre-wrap}
.cell-detail>details pre{font-size:12px;margin:.2em 0}
code{font-family:monospace}
.problem{color:#a00}
.plot{display:block;margin:.5em 0 1.2em;max-width:100%;height:auto}
.plot-legend .mark{margin-right:1em;white-space:nowrap}.plot-legend svg{vertical-align:middle}
#tests-table th,#tests-table td{border:1px solid #ddd;padding:1px 6px;font-size:12px;text-align:left}
#tests-table td:nth-child(1){font-family:monospace;word-break:break-all}
#tests-table td:nth-child(5),#tests-table td:nth-child(6){text-align:right;font-family:monospace}
#tests-table th{background:#f3f3f3;position:sticky;top:0}
#tests-table th[data-sort]{cursor:pointer}
#tests-table th[aria-sort=ascending]::after{content:" \\25B2"}#tests-table th[aria-sort=descending]::after{content:" \\25BC"}
#q{width:32em;font:inherit;padding:2px 4px}
"""

_SCRIPT = """
(function(){
  var area=document.getElementById('area-filter');
  var boxes=Array.prototype.slice.call(document.querySelectorAll('input.verdict-filter'));
  var total=document.querySelectorAll('tr.claim-row').length;
  function visible(el,a,on){
    var vs=el.getAttribute('data-verdicts').split(' ');
    return (!a||el.getAttribute('data-area')===a)&&vs.some(function(v){return on[v];});
  }
  function apply(){
    var a=area.value,on={},shown=0;
    boxes.forEach(function(b){on[b.value]=b.checked;});
    document.querySelectorAll('tr.claim-row').forEach(function(r){
      var vis=visible(r,a,on); r.hidden=!vis; if(vis){shown++;}
      r.querySelectorAll('td.cell[data-verdict]').forEach(function(c){
        c.classList.toggle('dim',!on[c.getAttribute('data-verdict')]);
      });
    });
    document.querySelectorAll('article.claim-detail').forEach(function(d){d.hidden=!visible(d,a,on);});
    document.getElementById('shown-count').textContent=shown+' of '+total+' claims shown';
  }
  var q=new URLSearchParams(window.location.search);
  if(q.get('area')!==null){area.value=q.get('area');}
  if(q.get('verdict')!==null){
    var want=q.get('verdict').split(',');
    boxes.forEach(function(b){b.checked=want.indexOf(b.value)>=0;});
  }
  area.addEventListener('change',apply);
  boxes.forEach(function(b){b.addEventListener('change',apply);});
  apply();

  /* the test table: search (every word must occur in the row) and sort by a column */
  var table=document.getElementById('tests-table');
  if(table){
    var body=table.tBodies[0], rows=Array.prototype.slice.call(body.rows), box=document.getElementById('q');
    var count=document.getElementById('q-count'), heads=Array.prototype.slice.call(table.tHead.rows[0].cells);
    var texts=rows.map(function(r){return r.textContent.toLowerCase();});
    document.getElementById('test-search').hidden=false;
    function search(){
      var words=box.value.toLowerCase().split(/\\s+/).filter(Boolean), n=0;
      rows.forEach(function(r,i){
        var ok=words.every(function(w){return texts[i].indexOf(w)>=0;}); r.hidden=!ok; if(ok){n++;}
      });
      count.textContent=n+' of '+rows.length+' tests';
    }
    function key(r,i,num){
      var t=r.cells[i].getAttribute('data-v')||r.cells[i].textContent;
      if(!num){return t;}
      var v=parseFloat(t); return isNaN(v)?-1:v;
    }
    function sort(i,desc){
      var num=heads[i].getAttribute('data-sort')==='num';
      var order=rows.map(function(r,k){return [key(r,i,num),k,r];});
      order.sort(function(a,b){
        var c=num?a[0]-b[0]:(a[0]<b[0]?-1:a[0]>b[0]?1:0); return (desc?-c:c)||a[1]-b[1];
      });
      order.forEach(function(o){body.appendChild(o[2]);});
      heads.forEach(function(h,k){if(k===i){h.setAttribute('aria-sort',desc?'descending':'ascending');}
                                  else{h.removeAttribute('aria-sort');}});
    }
    heads.forEach(function(h,i){h.addEventListener('click',function(){
      sort(i,h.getAttribute('aria-sort')==='ascending'||(!h.getAttribute('aria-sort')&&h.getAttribute('data-sort')==='num'));
    });});
    box.addEventListener('input',search);
    if(q.get('q')!==null){box.value=q.get('q');}
    var by=q.get('sort');
    heads.forEach(function(h,i){if(h.getAttribute('data-key')===by){sort(i,q.get('order')==='desc');}});
    search();
  }

  /* a link into a collapsed block (a matrix cell, a test row) opens the blocks around its target */
  function reveal(){
    var id=decodeURIComponent(location.hash.slice(1)), el=id&&document.getElementById(id);
    if(!el){return;}
    for(var p=el;p;p=p.parentElement){if(p.tagName==='DETAILS'){p.open=true;}}
    el.scrollIntoView();
  }
  window.addEventListener('hashchange',reveal);
  reveal();
})();
"""
